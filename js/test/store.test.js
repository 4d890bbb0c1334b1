// BatonStore, LangGraph.js's BaseStore on baton's Redis: each operation on
// a real redis-server, held against LangGraph's InMemoryStore where they
// agree, and read back in the layout the Go and Python stores read.
import { InMemoryStore, InvalidNamespaceError } from "@langchain/langgraph-checkpoint";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, inject, test } from "vitest";

import { BatonStore } from "../src/store.js";
import { dropPrefix } from "./harness.js";

let redis;
let n = 0;
const prefixes = [];

beforeAll(() => {
  redis = new Redis(inject("redisURL"));
});

afterAll(async () => {
  for (const p of prefixes) await dropPrefix(redis, p);
  await redis.quit();
});

function fresh() {
  n += 1;
  const prefix = `jsstore${n}`;
  prefixes.push(prefix);
  return new BatonStore({ redis, prefix });
}

const keys = (items) => items.map((i) => `${i.namespace.join("/")}:${i.key}`);

test("put, get, update, delete", async () => {
  const s = fresh();
  const ns = ["users", "u1"];
  await s.put(ns, "prefs", { theme: "dark" });
  const it = await s.get(ns, "prefs");
  expect(it).toMatchObject({ namespace: ns, key: "prefs", value: { theme: "dark" } });
  expect(it.createdAt).toBeInstanceOf(Date);
  await s.put(ns, "prefs", { theme: "light" });
  const again = await s.get(ns, "prefs");
  expect(again.value).toEqual({ theme: "light" });
  expect(again.createdAt.getTime()).toBe(it.createdAt.getTime());
  expect(await s.get(ns, "nope")).toBeNull();
  await s.delete(ns, "prefs");
  await s.delete(ns, "prefs");
  expect(await s.get(ns, "prefs")).toBeNull();
  expect(await s.listNamespaces()).toEqual([]);
});

test("search and listNamespaces agree with InMemoryStore", async () => {
  const s = fresh();
  const mem = new InMemoryStore();
  const spaces = [["docs"], ["docs", "a"], ["docs", "b"], ["docs", "b", "deep"], ["docsx"], ["users", "u1"]];
  let seed = 7;
  const rnd = (k) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % k;
  };
  for (let i = 0; i < 60; i += 1) {
    const ns = spaces[rnd(spaces.length)];
    const value = { type: ["report", "note"][rnd(2)], score: rnd(10) };
    await s.put(ns, `k${i % 25}`, value);
    await mem.put(ns, `k${i % 25}`, value);
  }
  const filters = [undefined, { type: "report" }, { score: { $gt: 4 } }, { score: { $gte: 2, $lt: 7 } },
    { type: { $ne: "note" } }, { score: 3 }, { score: { $in: [1, 2] } }];
  for (const prefix of [[], ["docs"], ["docs", "b"], ["users"], ["none"]]) {
    for (const filter of filters) {
      const got = await s.search(prefix, { filter, limit: 1000 });
      const want = await mem.search(prefix, { filter, limit: 1000 });
      expect(keys(got).sort(), JSON.stringify({ prefix, filter })).toEqual(keys(want).sort());
    }
  }
  const asSet = (l) => l.map((x) => x.join("/")).sort();
  for (const opts of [{}, { prefix: ["docs"] }, { suffix: ["b"] }, { prefix: ["*", "b"] }, { maxDepth: 1 }]) {
    expect(asSet(await s.listNamespaces(opts)), JSON.stringify(opts)).toEqual(asSet(await mem.listNamespaces(opts)));
  }
});

test("search pages in namespace then key order", async () => {
  const s = fresh();
  for (const [ns, k] of [[["a", "y"], "2"], [["a", "y"], "1"], [["a"], "z"], [["b"], "0"]]) await s.put(ns, k, { v: 1 });
  expect(keys(await s.search([]))).toEqual(["a:z", "a/y:1", "a/y:2", "b:0"]);
  expect(keys(await s.search([], { offset: 1, limit: 2 }))).toEqual(["a/y:1", "a/y:2"]);
});

test("the layout is the Go store's, and Python's", async () => {
  const s = fresh();
  await s.put(["users", "u1"], "prefs", { theme: "dark" }, undefined, { ttl: 5 });
  const raw = await redis.hget(`${s.prefix}:store:{n:users.u1}:items`, "prefs");
  const [c, u, ttl, exp, ...rest] = raw.split(" ");
  expect(c).toBe(u);
  expect(ttl).toBe("300000");
  expect(Number(exp)).toBe(Number(u) + 300000);
  expect(rest.join(" ")).toBe('{"theme":"dark"}');
  expect(await redis.zrange(`${s.prefix}:store:{index}:ns`, 0, -1)).toEqual(["users.u1"]);
});

test("a put cut after its index step is invisible", async () => {
  const s = fresh();
  await redis.zadd(`${s.prefix}:store:{index}:ns`, 0, "half.done");
  expect(await s.listNamespaces()).toEqual([]);
  expect(await s.search([])).toEqual([]);
  await s.put(["half", "done"], "k", { v: 1 });
  expect(await s.listNamespaces()).toEqual([["half", "done"]]);
});

test("bad input is refused and nothing stored", async () => {
  const s = fresh();
  for (const ns of [["a.b"], ["a", ""], [], ["langgraph"], ["x".repeat(300)]]) {
    await expect(s.put(ns, "k", { v: 1 }), JSON.stringify(ns)).rejects.toThrow(InvalidNamespaceError);
  }
  await expect(s.batch([{ namespace: ["ok"], key: "k", value: { v: 1 } }, { namespace: ["bad.label"], key: "k", value: {} }]))
    .rejects.toThrow(InvalidNamespaceError);
  await expect(s.search([], { filter: { a: { $regex: "x" } } })).rejects.toThrow(/unsupported filter operator/);
  await expect(s.put(["a"], "k", [1])).rejects.toThrow(/must be an object/);
  expect(await s.listNamespaces()).toEqual([]);
  expect(() => new BatonStore({ redis, index: { dims: 3 } })).toThrow(/no vector index/);
});
