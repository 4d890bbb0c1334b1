// The JS graph worker's side of the Agent Server API, driven over its
// protocol with live claims, as the Python worker's test_worker_api.py:
// the run fields, the stream modes as LangGraph's server names them, and
// the calls.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";

import { Redis } from "ioredis";
import { inject } from "vitest";

import { Batonctl, dropPrefix, packageDir } from "./harness.js";

const PROJECT = join(packageDir, "test", "fixtures", "project");
const API = join(packageDir, "test", "fixtures", "api");
const prefix = "jsapi";

let redis;
let ctl;
let worker;
let calls = 0;
let n = 0;

class Worker {
  #lines = [];
  #waiting = [];

  constructor(redisURL, prefix) {
    this.proc = spawn(process.execPath, ["--import", "tsx", join(packageDir, "src", "worker.js")], {
      cwd: PROJECT, stdio: ["pipe", "pipe", "inherit"], env: { ...process.env, AGENT_GREETING: "hello" },
    });
    createInterface({ input: this.proc.stdout }).on("line", (line) => {
      const m = JSON.parse(line);
      const w = this.#waiting.shift();
      if (w) w(m);
      else this.#lines.push(m);
    });
    this.send({ type: "init", redis_url: redisURL, prefix, graphs: {
      agent: join(PROJECT, "agent.mts") + ":graph", chat: join(PROJECT, "chat.mjs") + ":graph",
      review: join(PROJECT, "review.mjs") + ":graph", approve: join(API, "graphs.mjs") + ":approve",
      nested: join(API, "graphs.mjs") + ":nested" } });
  }

  send(m) {
    this.proc.stdin.write(JSON.stringify(m) + "\n");
  }

  read() {
    if (this.#lines.length > 0) return Promise.resolve(this.#lines.shift());
    return new Promise((r) => this.#waiting.push(r));
  }

  async run(lease, graph, fields = {}) {
    this.send({ type: "run", id: lease.claim, graph, run: lease.run, node: lease.node, thread: lease.thread,
      attempt: lease.attempt, epoch: lease.epoch, claim: lease.claim, worker: lease.worker,
      incarnation: lease.incarnation, stream_mode: [], ...fields });
    const chunks = [];
    for (;;) {
      const m = await this.read();
      expect(m.id).toBe(lease.claim);
      if (m.type !== "chunk") return { chunks, out: m };
      chunks.push(m);
    }
  }

  async call(op, args) {
    calls += 1;
    const id = `call-${calls}`;
    this.send({ type: "call", id, op, args });
    const m = await this.read();
    expect(m).toMatchObject({ type: "reply", id });
    return m;
  }

  async close() {
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.stdin.end();
    return exited;
  }
}

beforeAll(async () => {
  redis = new Redis(inject("redisURL"));
  ctl = new Batonctl(inject("batonctl"), inject("redisURL"));
  worker = new Worker(inject("redisURL"), prefix);
  expect((await worker.read()).type).toBe("ready");
});
afterAll(async () => {
  expect(await worker.close()).toBe(0);
  await dropPrefix(redis, prefix);
  await ctl.close();
  await redis.quit();
});
beforeEach(() => {
  n += 1;
});

/** One run on thread, committed: its chunks and outcome. */
async function turn(thread, graph, fields) {
  const lease = await ctl.claim(prefix, thread, "w1");
  const r = await worker.run(lease, graph, fields);
  await ctl.commit(prefix, lease);
  return r;
}

test("interrupts end: an interrupt ends the attempt with values, interrupts and next", async () => {
  const { out } = await turn(`end-${n}`, "review", { input: { change: "v3" }, interrupts: "end" });
  expect(out.type).toBe("done");
  expect(out.result.values).toEqual({ change: "v3", draft: "deploy v3" });
  expect(out.result.next).toEqual(["ask"]);
  expect(out.result.interrupts).toEqual([{ id: expect.any(String), value: { question: "deploy v3?" } }]);
  const plain = await turn(`end2-${n}`, "agent", { input: { topic: "x" }, interrupts: "end" });
  expect(plain.out.result).toMatchObject({ interrupts: [], next: [], values: { answer: "hello: x in 2 steps" } });
});

test("two resumes of one interrupt continue it once; a resume of an answered one names both", async () => {
  const t = `res-${n}`;
  const first = await turn(t, "approve", { input: { change: "c" }, interrupts: "end" });
  const one = first.out.result.interrupts[0].id;
  const next = await turn(t, "approve", { command: { resume: "yes" }, resumes: [one], interrupts: "end" });
  const two = next.out.result.interrupts[0].id;
  expect(next.out.result.next).toEqual(["ask_second"]);
  const again = await turn(t, "approve", { command: { resume: "no" }, resumes: [one], interrupts: "end" });
  expect(again.out).toMatchObject({ type: "error", permanent: true });
  expect(again.out.error).toContain("interrupt already answered");
  expect(again.out.error).toContain(one);
  expect(again.out.error).toContain(two);
  const last = await turn(t, "approve", { command: { resume: "ok" }, resumes: [two], interrupts: "end" });
  expect(last.out.result).toMatchObject({ values: { first: "yes", second: "ok" }, next: [], interrupts: [] });
  const late = await turn(t, "approve", { command: { resume: "late" }, resumes: [two], interrupts: "end" });
  expect(late.out.error).toContain("has no interrupt");
  expect(late.out.error).toContain(two);
  const state = (await worker.call("get_state", { graph: "approve", thread: t })).result;
  expect(state.values).toEqual({ change: "c", first: "yes", second: "ok" });
});

test("update_state writes a checkpoint as the node; an unknown node fails naming the graph's", async () => {
  const t = `upd-${n}`;
  await turn(t, "agent", { input: { topic: "u" } });
  const { out } = await turn(t, "agent", { update_state: { values: { answer: "edited" }, as_node: "write" } });
  expect(out.type).toBe("done");
  expect(out.result.checkpoint).toMatchObject({ thread_id: t, checkpoint_ns: "", checkpoint_id: expect.any(String) });
  const state = (await worker.call("get_state", { graph: "agent", thread: t })).result;
  expect(state.values.answer).toBe("edited");
  expect(state.checkpoint.checkpoint_id).toBe(out.result.checkpoint.checkpoint_id);
  const bad = await turn(t, "agent", { update_state: { values: {}, as_node: "wirte" } });
  expect(bad.out).toMatchObject({ type: "error", permanent: true });
  expect(bad.out.error).toContain('as_node "wirte"');
  expect(bad.out.error).toContain("plan, write");
});

test("checkpoint_id runs from a past checkpoint, and interrupt_before stops before a node", async () => {
  const t = `tt-${n}`;
  await turn(t, "agent", { input: { topic: "t" } });
  const hist = (await worker.call("history", { graph: "agent", thread: t, limit: 10 })).result;
  const before = hist.find((s) => s.next.length === 1 && s.next[0] === "write");
  const { out } = await turn(t, "agent", { input: null, checkpoint_id: before.checkpoint.checkpoint_id });
  expect(out).toMatchObject({ type: "done", result: { steps: ["plan t", "write"] } });
  const bad = await turn(t, "agent", { input: null, checkpoint_id: "nope" });
  expect(bad.out.error).toContain('checkpoint_id "nope"');
  for (const [thread, brk] of [[`ib-${n}`, { interrupt_before: ["write"] }], [`ia-${n}`, { interrupt_after: ["plan"] }]]) {
    const lease = await ctl.claim(prefix, thread, "w1");
    const stop = await worker.run(lease, "agent", { input: { topic: "b" }, interrupts: "end", metadata: { origin: "test" },
      assistant_id: "a-1", ...brk });
    expect(stop.out.result).toMatchObject({ next: ["write"], interrupts: [] });
    // Its commit lost, the attempt is run again: it stops at the same breakpoint.
    const again = await worker.run(lease, "agent", { input: { topic: "b" }, interrupts: "end", ...brk });
    expect(again.out.result).toEqual(stop.out.result);
    await ctl.commit(prefix, lease);
  }
  const on = await turn(`ib-${n}`, "agent", { input: null, interrupts: "end" });
  expect(on.out.result).toMatchObject({ next: [], values: { answer: "hello: b in 2 steps" } });
});

test("messages-tuple, messages, events and subgraph events are named as the server names them", async () => {
  const { chunks, out } = await turn(`msg-${n}`, "chat", { input: { messages: [{ role: "user", content: "q" }] },
    stream_mode: ["messages-tuple", "messages"] });
  expect(out.type).toBe("done");
  const tuples = chunks.filter((c) => c.event === "messages").map((c) => c.data);
  expect(tuples.length).toBeGreaterThan(1);
  expect(tuples.every((t) => t[0].type === "ai" && typeof t[0].id === "string" && t[1].langgraph_node === "respond")).toBe(true);
  expect(chunks.filter((c) => c.event === "messages/metadata").length).toBe(1);
  const partial = chunks.filter((c) => c.event === "messages/partial").map((c) => c.data[0]);
  expect(partial.at(-1).content).toBe("fenced tokens");
  const complete = chunks.filter((c) => c.event === "messages/complete").flatMap((c) => c.data);
  expect(complete.map((m) => m.type)).toEqual(["human", "ai"]);

  const ev = await turn(`ev-${n}`, "agent", { input: { topic: "e" }, stream_mode: ["events"] });
  expect(new Set(ev.chunks.map((c) => c.event))).toEqual(new Set(["events"]));
  expect(ev.chunks.some((c) => c.data.event === "on_chain_start")).toBe(true);

  const sub = await turn(`sub-${n}`, "nested", { input: { text: "a" }, stream_mode: ["updates"], subgraphs: true });
  expect(sub.out.result).toEqual({ text: "A" });
  const names = sub.chunks.map((c) => c.event);
  expect(names).toContain("updates");
  expect(names.some((e) => e.startsWith("updates|child:"))).toBe(true);
});

test("the calls answer in the server's shapes, and name what is wrong", async () => {
  const t = `call-${n}`;
  await turn(t, "review", { input: { change: "v5" } });
  const st = (await worker.call("get_state", { graph: "review", thread: t })).result;
  expect(Object.keys(st).sort()).toEqual(["checkpoint", "created_at", "interrupts", "metadata", "next",
    "parent_checkpoint", "tasks", "values"]);
  expect(st.next).toEqual(["ask"]);
  expect(Object.keys(st.tasks[0]).sort()).toEqual(["checkpoint", "error", "id", "interrupts", "name", "path", "result", "state"]);
  expect(st.interrupts).toEqual(st.tasks[0].interrupts);
  const hist = (await worker.call("history", { graph: "review", thread: t, limit: 2 })).result;
  expect(hist.length).toBe(2);
  expect(hist[0].checkpoint).toEqual(st.checkpoint);
  const older = (await worker.call("history", { graph: "review", thread: t, before: hist[0].checkpoint.checkpoint_id })).result;
  expect(older[0].checkpoint).toEqual(hist[1].checkpoint);
  const drawn = (await worker.call("graph", { graph: "agent" })).result;
  expect(drawn.nodes.map((x) => x.id).sort()).toEqual(["__end__", "__start__", "plan", "write"]);
  expect(Object.keys((await worker.call("subgraphs", { graph: "nested" })).result)).toEqual(["child"]);
  const sch = (await worker.call("schemas", { graph: "review" })).result;
  expect(sch.graph_id).toBe("review");
  expect(Object.keys(sch.input_schema.properties)).toEqual(["change", "draft", "verdict", "published"]);
  expect(Object.keys(sch.state_schema.properties)).toEqual(["change", "draft", "verdict", "published"]);
  for (const [op, args, code, text] of [
    ["get_state", { graph: "nope", thread: "t" }, "not_found", 'unknown graph "nope"'],
    ["get_state", { graph: "agent", thread: t, checkpoint_id: "nope" }, "not_found", 'no checkpoint "nope"'],
    ["get_state", { graph: "agent" }, "invalid", "thread: want a non-empty string"],
    ["history", { graph: "agent", thread: t, limit: 0 }, "invalid", "limit: want a positive integer"],
    ["explode", { graph: "agent" }, "invalid", 'unknown op "explode"'],
  ]) {
    const m = await worker.call(op, args);
    expect(m.code).toBe(code);
    expect(m.error).toContain(text);
  }
});
