// baton's own guarantees for BatonSaver, on a real redis-server with leases
// claimed through baton's Go code: a stale saver changes nothing through any
// method, the current one does, and a takeover resumes a graph from its last
// super-step.
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { Redis } from "ioredis";
import { inject } from "vitest";

import { BatonError, BatonFencedError, BatonSaver, parseToken } from "../src/index.js";
import { Keys } from "../src/keys.js";
import { Batonctl, dropPrefix } from "./harness.js";

let redis;
let ctl;
let n = 0;
let prefix;

beforeAll(() => {
  redis = new Redis(inject("redisURL"));
  ctl = new Batonctl(inject("batonctl"), inject("redisURL"));
});
afterAll(async () => {
  await ctl.close();
  await redis.quit();
});
beforeEach(() => {
  n += 1;
  prefix = `fence${n}`;
});
afterEach(async () => {
  await dropPrefix(redis, prefix);
});

const meta = { source: "loop", step: 0, parents: {} };

function checkpoint() {
  return { ...emptyCheckpoint(), id: uuid6(-1) };
}

/** Everything the store keeps for a thread's checkpoints, to compare before and after. */
async function threadState(thread) {
  const k = new Keys(prefix);
  const out = { cp: await redis.hgetall(k.checkpoints(thread)) };
  for (const ns of Object.keys(out.cp)) {
    const [v, d, i, w] = k.checkpointNS(thread, ns);
    out[ns] = {
      versions: await redis.zrange(v, 0, -1),
      data: await redis.hgetall(d),
      ids: await redis.hgetall(i),
      writes: await redis.hgetall(w),
    };
  }
  return out;
}

async function events(lease) {
  const entries = await redis.xrange(new Keys(prefix).events(lease.thread, lease.run), "-", "+");
  return entries.map(([, fields]) => {
    const e = {};
    for (let i = 0; i < fields.length; i += 2) e[fields[i]] = fields[i + 1];
    return e;
  });
}

/** A lease that ran out and the takeover that followed it (epoch 2). */
async function takenOver(thread) {
  const old = await ctl.claim(prefix, thread, "w-old", 200);
  const cur = await ctl.takeover(prefix, old, "w-new");
  return { old, cur };
}

describe("a stale BatonSaver", () => {
  it("changes nothing through put, putWrites or deleteThread, and the current one does", async () => {
    const thread = "chat-1";
    const old = await ctl.claim(prefix, thread, "w-old", 200);
    const stale = new BatonSaver({ redis, prefix, lease: old });
    const first = checkpoint();
    const cfg = await stale.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, first, meta, {});
    await stale.putWrites(cfg, [["answer", 41]], "task-a");
    await stale.put({ configurable: { thread_id: thread, checkpoint_ns: "sub:1" } }, checkpoint(), meta, {});

    const cur = await ctl.takeover(prefix, old, "w-new");
    expect(cur.epoch).toBe(old.epoch + 1);
    const current = new BatonSaver({ redis, prefix, lease: cur });
    const before = await threadState(thread);

    // Each late write is the first call of a saver of the old lease (once
    // refused, a saver fails every later call without asking Redis).
    const late = [
      ["checkpoint", (s) => s.put(cfg, checkpoint(), meta, {})],
      ["checkpoint_writes", (s) => s.putWrites(cfg, [["answer", 0]], "task-b")],
      ["checkpoint_writes", (s) => s.putWrites(cfg, [["__error__", "late"]], "task-a")],
      ["checkpoint_delete", (s) => s.deleteThread(thread)],
    ];
    for (const [i, [op, write]] of late.entries()) {
      const s = i === 0 ? stale : new BatonSaver({ redis, prefix, lease: old });
      const err = await write(s).then(() => undefined, (e) => e);
      expect(err).toBeInstanceOf(BatonFencedError);
      expect(err.code).toBe(-10);
      expect(err.op).toBe(op);
      expect(s.signal.aborted).toBe(true);
      expect(s.signal.reason).toBeInstanceOf(BatonFencedError);
      expect(s.signal.reason.reason).toBe("refused");
    }
    await expect(stale.putWrites(cfg, [["answer", 1]], "task-d")).rejects.toBe(stale.signal.reason);
    expect(await threadState(thread)).toEqual(before);
    const rejected = (await events(old)).filter((e) => e.type === "stale_rejected");
    expect(rejected.map((e) => [e.op, e.epoch, e.worker, e.current_epoch])).toEqual(
      late.map(([op]) => [op, String(old.epoch), "w-old", String(cur.epoch)]),
    );

    // The same epoch under another claim id (a claim a failover lost) is refused too.
    const forged = new BatonSaver({ redis, prefix, lease: { ...cur, claim: "another-claim" } });
    await expect(forged.put(cfg, checkpoint(), meta, {})).rejects.toMatchObject({ name: "BatonFencedError", code: -11 });
    expect(await threadState(thread)).toEqual(before);

    // The current claim's writes are accepted, deleteThread included.
    const next = await current.put(cfg, checkpoint(), meta, {});
    await current.putWrites(next, [["answer", 42]], "task-c");
    expect((await current.getTuple({ configurable: { thread_id: thread } })).pendingWrites).toEqual([["task-c", "answer", 42]]);
    expect(current.signal.aborted).toBe(false);
    await current.deleteThread(thread);
    expect(await current.getTuple({ configurable: { thread_id: thread } })).toBeUndefined();
    expect(await current.getTuple({ configurable: { thread_id: thread, checkpoint_ns: "sub:1" } })).toBeUndefined();
    const after = await current.put({ configurable: { thread_id: thread } }, checkpoint(), meta, {});
    expect(after.configurable.checkpoint_ns).toBe("");
  });

  it("is refused once its run has finished, even by a delete", async () => {
    const { old, cur } = await takenOver("chat-2");
    const current = new BatonSaver({ redis, prefix, lease: cur });
    await current.put({ configurable: { thread_id: "chat-2" } }, checkpoint(), meta, {});
    await ctl.commit(prefix, cur);
    const before = await threadState("chat-2");
    for (const lease of [old, cur]) {
      const s = new BatonSaver({ redis, prefix, lease });
      await expect(s.deleteThread("chat-2")).rejects.toBeInstanceOf(BatonFencedError);
      await expect(s.put({ configurable: { thread_id: "chat-2" } }, checkpoint(), meta, {})).rejects.toBeInstanceOf(BatonFencedError);
    }
    expect(await threadState("chat-2")).toEqual(before);
  });
});

describe("BatonSaver", () => {
  it("writes only to its lease's thread", async () => {
    const lease = await ctl.claim(prefix, "mine", "w");
    const s = new BatonSaver({ redis, prefix, lease });
    await expect(s.put({ configurable: { thread_id: "theirs" } }, checkpoint(), meta, {})).rejects.toThrow(/not this lease's thread/);
    await expect(s.deleteThread("theirs")).rejects.toBeInstanceOf(BatonError);
    await expect(s.put({ configurable: { thread_id: "mine", checkpoint_ns: "bad ns" } }, checkpoint(), meta, {})).rejects.toThrow(/checkpoint_ns/);
    await expect(s.put({ configurable: { thread_id: "mine" } }, { ...checkpoint(), id: "{forged}" }, meta, {})).rejects.toThrow(/invalid id/);
  });

  it("fromEnv() takes everything from the exec kind's environment", async () => {
    const lease = await ctl.claim(prefix, "env-thread", "worker-7");
    const env = {
      BATON_REDIS_URL: inject("redisURL"),
      BATON_PREFIX: prefix,
      BATON_FENCING_TOKEN: lease.token,
      BATON_THREAD_ID: lease.thread,
      BATON_WORKER_ID: lease.worker,
      BATON_RUN_ID: lease.run,
      BATON_NODE_ID: lease.node,
      BATON_EPOCH: String(lease.epoch),
    };
    const s = BatonSaver.fromEnv({}, env);
    try {
      expect(s.lease).toMatchObject({ thread: lease.thread, run: lease.run, node: lease.node, epoch: lease.epoch, claim: lease.claim });
      const cfg = await s.put({ configurable: { thread_id: "env-thread" } }, checkpoint(), meta, {});
      expect((await s.getTuple(cfg)).config).toEqual(cfg);
      const saved = (await events(lease)).find((e) => e.type === "checkpointed");
      expect(saved).toMatchObject({ worker: "worker-7", epoch: String(lease.epoch), ns: "" });
    } finally {
      await s.close();
    }
    expect(() => BatonSaver.fromEnv({}, { ...env, BATON_EPOCH: "9" })).toThrow(/disagrees/);
    expect(() => BatonSaver.fromEnv({}, { ...env, BATON_REDIS_URL: "" })).toThrow(/BATON_REDIS_URL/);
  });

  it("parses fencing tokens as fence.ParseToken does", () => {
    expect(parseToken("r1~ab12/n@3/c0ffee")).toEqual({ run: "r1", incarnation: "ab12", node: "n", epoch: 3, claim: "c0ffee" });
    expect(parseToken("r1/n@1/c")).toEqual({ run: "r1", incarnation: "", node: "n", epoch: 1, claim: "c" });
    for (const bad of ["r1/n", "r1/n@0/c", "r1/n@x/c", "r1/n@2/", "r1@2/c", "r{1}/n@2/c"]) {
      expect(() => parseToken(bad), bad).toThrow(BatonError);
    }
  });
});

describe("a takeover", () => {
  it("resumes the graph from its last super-step, and the paused owner's late writes are refused", async () => {
    const thread = "agent-1";
    const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
    let release;
    const paused = new Promise((r) => (release = r));
    let reachedStep3;
    const atStep3 = new Promise((r) => (reachedStep3 = r));
    const build = (who, saver) => {
      const step = (name) => async () => {
        if (who === "A" && name === "s3") {
          reachedStep3();
          await paused; // A stops here past its lease, like a process in a long GC pause
        }
        return { log: [`${name}@${who}`] };
      };
      return new StateGraph(State)
        .addNode("s1", step("s1"))
        .addNode("s2", step("s2"))
        .addNode("s3", step("s3"))
        .addNode("s4", step("s4"))
        .addEdge(START, "s1")
        .addEdge("s1", "s2")
        .addEdge("s2", "s3")
        .addEdge("s3", "s4")
        .addEdge("s4", END)
        .compile({ checkpointer: saver });
    };
    const config = { configurable: { thread_id: thread }, durability: "sync" };

    const leaseA = await ctl.claim(prefix, thread, "w-a", 300);
    const saverA = new BatonSaver({ redis, prefix, lease: leaseA });
    const runA = build("A", saverA).invoke({ log: [] }, { ...config, signal: saverA.signal });
    await atStep3;

    const leaseB = await ctl.takeover(prefix, leaseA, "w-b");
    const saverB = new BatonSaver({ redis, prefix, lease: leaseB });
    const graphB = build("B", saverB);
    const resumeFrom = await graphB.getState({ configurable: { thread_id: thread } });
    expect(resumeFrom.next).toEqual(["s3"]);
    expect(resumeFrom.values.log).toEqual(["s1@A", "s2@A"]);
    const final = await graphB.invoke(null, { ...config, signal: saverB.signal });
    expect(final.log).toEqual(["s1@A", "s2@A", "s3@B", "s4@B"]);

    const before = await threadState(thread);
    release();
    await expect(runA).rejects.toBeInstanceOf(BatonFencedError);
    expect(await threadState(thread)).toEqual(before);
    const state = await graphB.getState({ configurable: { thread_id: thread } });
    expect(state.values.log).toEqual(["s1@A", "s2@A", "s3@B", "s4@B"]);
    expect(state.next).toEqual([]);
    const rejected = (await events(leaseA)).filter((e) => e.type === "stale_rejected");
    expect(rejected.length).toBeGreaterThan(0);
    for (const e of rejected) {
      expect(e.op).toMatch(/^checkpoint/);
      expect(e.worker).toBe("w-a");
    }
  });
});
