// The JS graph worker (src/worker.js) driven over its protocol
// (docs/graph-workers.md) as the runner drives it, with live claims made
// through baton's Go code: a TypeScript graph through tsx, the fake chat
// model's tokens in order, an interrupt and its resume, and a write under a
// lease that was taken over refused.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";

import { Redis } from "ioredis";
import { inject } from "vitest";

import { Batonctl, dropPrefix, packageDir } from "./harness.js";

const PROJECT = join(packageDir, "test", "fixtures", "project");

let redis;
let ctl;
let worker;
let n = 0;
let prefix;

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
      review: join(PROJECT, "review.mjs") + ":graph" } });
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

  async close() {
    const exited = new Promise((r) => this.proc.once("exit", r));
    this.proc.stdin.end();
    return exited;
  }
}

beforeAll(async () => {
  redis = new Redis(inject("redisURL"));
  ctl = new Batonctl(inject("batonctl"), inject("redisURL"));
  worker = new Worker(inject("redisURL"), "jsworker");
  const ready = await worker.read();
  expect(ready).toMatchObject({ type: "ready", graphs: ["agent", "chat", "review"] });
});
afterAll(async () => {
  expect(await worker.close()).toBe(0);
  await dropPrefix(redis, "jsworker");
  await ctl.close();
  await redis.quit();
});
beforeEach(() => {
  n += 1;
  prefix = "jsworker";
});

test("a TypeScript graph runs through tsx, and its result is the final state", async () => {
  const lease = await ctl.claim(prefix, `agent-${n}`, "w1");
  const { chunks, out } = await worker.run(lease, "agent", { input: { topic: "fencing" }, stream_mode: ["updates"] });
  expect(out).toMatchObject({ type: "done", result: { answer: "hello: fencing in 2 steps", steps: ["plan fencing", "write"] } });
  expect(chunks.map((c) => Object.keys(c.data))).toEqual([["plan"], ["write"]]);
});

test("the fake chat model's tokens arrive in order, as messages chunks", async () => {
  const lease = await ctl.claim(prefix, `chat-${n}`, "w1");
  const { chunks, out } = await worker.run(lease, "chat", {
    input: { messages: [{ role: "user", content: "hi" }] }, stream_mode: ["messages-tuple", "values"] });
  expect(out.type).toBe("done");
  expect(out.result.messages.at(-1)).toMatchObject({ type: "ai", content: "fenced tokens" });
  const tokens = chunks.filter((c) => c.event === "messages");
  expect(tokens.length).toBeGreaterThan(3);
  expect(tokens.map((t) => t.data[0].content).join("")).toBe("fenced tokens");
  expect(tokens.every((t) => t.data[1].langgraph_node === "respond")).toBe(true);
});

test("an interrupt is reported, and an attempt with the resume continues the graph", async () => {
  const lease = await ctl.claim(prefix, `review-${n}`, "w1");
  const first = await worker.run(lease, "review", { input: { change: "v2" } });
  expect(first.out).toEqual({ type: "interrupt", id: lease.claim, request: { question: "deploy v2?" } });
  const again = await worker.run(lease, "review", {});
  expect(again.out.type).toBe("interrupt");
  const done = await worker.run(lease, "review", { resume: { wait: "w1", value: { approved: true } } });
  expect(done.out).toMatchObject({ type: "done", result: { published: "deploy v2: approved" } });
});

test("a write under a lease that was taken over is refused, and the attempt is lost", async () => {
  const old = await ctl.claim(prefix, `late-${n}`, "w1", 300);
  await new Promise((r) => setTimeout(r, 1500)); // the lease and the grace run out on Redis's clock
  const fresh = await ctl.takeover(prefix, old, "w2");
  expect(fresh.epoch).toBe(old.epoch + 1);
  const { out } = await worker.run(old, "agent", { input: { topic: "late" } });
  expect(out.type).toBe("lost");
});

test("an unknown graph is a permanent error", async () => {
  const lease = await ctl.claim(prefix, `unk-${n}`, "w1");
  const { out } = await worker.run(lease, "nope");
  expect(out).toMatchObject({ type: "error", permanent: true });
  expect(out.error).toContain('unknown graph "nope"');
});
