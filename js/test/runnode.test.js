// runNode decides between resuming and starting by who wrote the thread's
// newest checkpoint: only a graph this same run started is resumed, a new
// run starts with its own input on the thread's state, and a graph this
// run already finished is not run again.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Annotation, END, START, StateGraph, interrupt } from "@langchain/langgraph";
import { Redis } from "ioredis";
import { inject, vi } from "vitest";

import { BatonSaver, EXIT_LEASE_LOST, runNode } from "../src/index.js";
import { Keys } from "../src/keys.js";
import { Batonctl, dropPrefix } from "./harness.js";

let redis;
let ctl;
let n = 0;
let prefix;
let printed;
let waits;

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
  prefix = `node${n}`;
  printed = [];
  waits = [];
  const write = process.stdout.write.bind(process.stdout);
  vi.spyOn(process.stdout, "write").mockImplementation((s, ...rest) => {
    if (typeof s === "string" && s.startsWith("{")) {
      printed.push(JSON.parse(s));
      return true;
    }
    if (typeof s === "string" && s.startsWith("::wait")) {
      waits.push(s);
      return true;
    }
    return write(s, ...rest);
  });
  vi.spyOn(process.stderr, "write").mockImplementation(() => true);
});
afterEach(async () => {
  vi.restoreAllMocks();
  await dropPrefix(redis, prefix);
});

/**
 * A three-step graph that answers its question; ran counts the steps run,
 * failAt names a step that throws once (a crash mid-graph).
 */
function agent(ran, failAt = new Set()) {
  const State = Annotation.Root({
    question: Annotation(),
    log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
    answer: Annotation(),
  });
  const step = (name, f) => async (s) => {
    ran.push(name);
    if (failAt.delete(name)) throw new Error(`${name} crashed`);
    return { log: [`${name}:${s.question}`], ...f?.(s) };
  };
  return new StateGraph(State)
    .addNode("read", step("read"))
    .addNode("think", step("think"))
    .addNode("reply", step("reply", (s) => ({ answer: `re ${s.question}` })))
    .addEdge(START, "read")
    .addEdge("read", "think")
    .addEdge("think", "reply")
    .addEdge("reply", END);
}

const saverOf = (lease) => new BatonSaver({ redis, prefix, lease, onLost: "abort" });

describe("runNode", () => {
  it("starts a fresh graph with the run's input and prints the final state", async () => {
    const lease = await ctl.claim(prefix, "t-fresh", "w");
    const ran = [];
    const out = await runNode(agent(ran), { saver: saverOf(lease), exit: false, env: { BATON_RUN_ID: lease.run }, input: (env) => ({ question: env.BATON_RUN_ID }) });
    expect(out.code).toBe(0);
    expect(ran).toEqual(["read", "think", "reply"]);
    expect(printed).toEqual([{ question: lease.run, log: [`read:${lease.run}`, `think:${lease.run}`, `reply:${lease.run}`], answer: `re ${lease.run}` }]);
    const saved = await saverOf(lease).getTuple({ configurable: { thread_id: "t-fresh" } });
    expect(saved.metadata.baton_run).toBe(lease.run);
  });

  it("resumes a graph this run started, after a takeover", async () => {
    const a = await ctl.claim(prefix, "t-resume", "w-a", 300);
    const ran = [];
    const first = await runNode(agent(ran, new Set(["think"])), { saver: saverOf(a), exit: false, input: { question: "q1" } });
    expect(first.code).toBe(1); // a crash: a failed attempt
    const b = await ctl.takeover(prefix, a, "w-b");
    const out = await runNode(agent(ran), { saver: saverOf(b), exit: false, input: { question: "ignored" } });
    expect(out).toMatchObject({ code: 0, resumed: true });
    expect(ran).toEqual(["read", "think", "think", "reply"]); // read is not run again
    expect(printed.at(-1)).toEqual({ question: "q1", log: ["read:q1", "think:q1", "reply:q1"], answer: "re q1" });
  });

  it("does not run again a graph this run finished before its commit; its state is the result", async () => {
    const a = await ctl.claim(prefix, "t-done", "w-a", 300);
    const ran = [];
    await runNode(agent(ran), { saver: saverOf(a), exit: false, input: { question: "q1" } });
    // The runner stopped before committing; another takes the node over.
    const b = await ctl.takeover(prefix, a, "w-b");
    const out = await runNode(agent(ran), { saver: saverOf(b), exit: false, input: { question: "q1" } });
    expect(out).toMatchObject({ code: 0, done: true });
    expect(ran).toEqual(["read", "think", "reply"]);
    expect(printed).toHaveLength(2);
    expect(printed[1]).toEqual(printed[0]);
  });

  it("answers a new run's own input on the thread's state, not the graph an earlier run left unfinished", async () => {
    const i1 = await ctl.claim(prefix, "t-chat", "w");
    const ran = [];
    const first = await runNode(agent(ran, new Set(["think"])), { saver: saverOf(i1), exit: false, input: { question: "q1" } });
    expect(first.code).toBe(1); // i1 stops mid-graph (as when interrupted) ...
    await ctl.commit(prefix, i1); // ... and its run ends
    const i2 = await ctl.claim(prefix, "t-chat", "w");
    const out = await runNode(agent(ran), { saver: saverOf(i2), exit: false, input: { question: "q2" } });
    expect(out).toMatchObject({ code: 0, resumed: false, done: false });
    expect(printed.at(-1).answer).toBe("re q2");
    // The thread's state carried over: i1's read is in the log before i2's steps.
    expect(printed.at(-1).log).toEqual(["read:q1", "read:q2", "think:q2", "reply:q2"]);
  });

  it("maps a lost lease to exit code 75 and prints no result", async () => {
    const a = await ctl.claim(prefix, "t-lost", "w-a", 300);
    const State = Annotation.Root({ x: Annotation() });
    let release;
    const gate = new Promise((r) => (release = r));
    const graph = new StateGraph(State)
      .addNode("slow", async () => {
        await gate;
        return { x: 1 };
      })
      .addNode("after", async () => ({ x: 2 }))
      .addEdge(START, "slow")
      .addEdge("slow", "after")
      .addEdge("after", END);
    const saver = saverOf(a);
    const running = runNode(graph, { saver, exit: false, input: { x: 0 } });
    await ctl.takeover(prefix, a, "w-b");
    release();
    const out = await running;
    expect(out.code).toBe(EXIT_LEASE_LOST);
    expect(saver.signal.aborted).toBe(true);
    expect(printed).toEqual([]);
  });
});

/**
 * A graph that asks a person in its second step, as LangGraph's docs show:
 * interrupt(question) returns the answer once the graph is resumed with
 * Command({ resume }).
 */
function approval(ran) {
  const State = Annotation.Root({
    change: Annotation(),
    log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  });
  return new StateGraph(State)
    .addNode("plan", async (s) => {
      ran.push("plan");
      return { log: [`plan:${s.change}`] };
    })
    .addNode("approve", async (s) => {
      ran.push("approve");
      const answer = interrupt({ ask: `deploy ${s.change}?` });
      return { log: [`approved:${JSON.stringify(answer)}`] };
    })
    .addNode("deploy", async () => {
      ran.push("deploy");
      return { log: ["deployed"] };
    })
    .addEdge(START, "plan")
    .addEdge("plan", "approve")
    .addEdge("approve", "deploy")
    .addEdge("deploy", END);
}

/** An environment whose BATON_RESUME_FILE holds text, as the exec kind's after a resume. */
function resumed(text) {
  const file = join(mkdtempSync(join(tmpdir(), "baton-resume-")), "resume.json");
  writeFileSync(file, text);
  return { BATON_RESUME_FILE: file };
}

describe("runNode and interrupt()", () => {
  it("parks on interrupt(): prints ::wait with the interrupt's value, no result, and exits 0", async () => {
    const lease = await ctl.claim(prefix, "t-ask", "w");
    const ran = [];
    const out = await runNode(approval(ran), { saver: saverOf(lease), exit: false, env: {}, input: { change: "v2" } });
    expect(out).toMatchObject({ code: 0, waiting: { ask: "deploy v2?" } });
    expect(waits).toEqual(['::wait {"ask":"deploy v2?"}\n']);
    expect(printed).toEqual([]);
    expect(ran).toEqual(["plan", "approve"]);
    const saved = await saverOf(lease).getTuple({ configurable: { thread_id: "t-ask" } });
    expect(saved.metadata.baton_run).toBe(lease.run);
  });

  it("resumes with Command({ resume }) from BATON_RESUME_FILE: the answer reaches the graph, finished steps do not run again", async () => {
    const a = await ctl.claim(prefix, "t-answer", "w-a", 300);
    const ran = [];
    await runNode(approval(ran), { saver: saverOf(a), exit: false, env: {}, input: { change: "v2" } });
    // Parked, then resumed: the next attempt is a new claim of the node.
    const b = await ctl.takeover(prefix, a, "w-b");
    const out = await runNode(approval(ran), { saver: saverOf(b), exit: false, env: resumed('{"ok": true, "by": "ann"}'), input: { change: "ignored" } });
    expect(out).toMatchObject({ code: 0, resumed: true });
    expect(out.waiting).toBeUndefined();
    expect(ran).toEqual(["plan", "approve", "approve", "deploy"]); // LangGraph runs the interrupted node again; plan is not
    expect(printed).toEqual([{ change: "v2", log: ["plan:v2", 'approved:{"ok":true,"by":"ann"}', "deployed"] }]);
  });

  it("asks again, running nothing, when an attempt finds its graph stopped on an interrupt and no resume", async () => {
    const a = await ctl.claim(prefix, "t-again", "w-a", 300);
    const ran = [];
    await runNode(approval(ran), { saver: saverOf(a), exit: false, env: {}, input: { change: "v3" } });
    const b = await ctl.takeover(prefix, a, "w-b"); // the park was lost with its attempt
    const out = await runNode(approval(ran), { saver: saverOf(b), exit: false, env: {}, input: { change: "ignored" } });
    expect(out).toMatchObject({ code: 0, waiting: { ask: "deploy v3?" } });
    expect(ran).toEqual(["plan", "approve"]);
    expect(waits).toEqual(['::wait {"ask":"deploy v3?"}\n', '::wait {"ask":"deploy v3?"}\n']);
  });

  it("asks for several interrupts at once by id, and a resume answers each by its id", async () => {
    const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
    const graph = () =>
      new StateGraph(State)
        .addNode("legal", async () => ({ log: [`legal:${interrupt("legal ok?")}`] }))
        .addNode("security", async () => ({ log: [`security:${interrupt("security ok?")}`] }))
        .addEdge(START, "legal")
        .addEdge(START, "security")
        .addEdge("legal", END)
        .addEdge("security", END);
    const a = await ctl.claim(prefix, "t-two", "w-a", 300);
    const first = await runNode(graph(), { saver: saverOf(a), exit: false, env: {}, input: {} });
    expect(first.code).toBe(0);
    const asks = first.waiting.interrupts;
    expect(asks.map((i) => i.value).sort()).toEqual(["legal ok?", "security ok?"]);
    const answers = Object.fromEntries(asks.map((i) => [i.id, i.value.startsWith("legal") ? "yes" : "no"]));
    const b = await ctl.takeover(prefix, a, "w-b");
    const out = await runNode(graph(), { saver: saverOf(b), exit: false, env: resumed(JSON.stringify(answers)) });
    expect(out.code).toBe(0);
    expect(printed.at(-1).log.sort()).toEqual(["legal:yes", "security:no"]);
  });

  it("gives one answer to one interrupt: a resume already given does not answer a later interrupt", async () => {
    const State = Annotation.Root({ log: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }) });
    const ran = [];
    let crash = true;
    const graph = () =>
      new StateGraph(State)
        .addNode("first", async () => (ran.push("first"), { log: [`first:${interrupt("first?")}`] }))
        .addNode("middle", async () => {
          ran.push("middle");
          if (crash) {
            crash = false;
            throw new Error("middle crashed");
          }
          return { log: ["middle"] };
        })
        .addNode("second", async () => (ran.push("second"), { log: [`second:${interrupt("second?")}`] }))
        .addEdge(START, "first")
        .addEdge("first", "middle")
        .addEdge("middle", "second")
        .addEdge("second", END);
    // What resume.lua leaves on the node: the id of the wait it answered.
    const answered = (lease, wait) => redis.hset(new Keys(prefix).node(lease.thread, lease.run, lease.node), "resumed_wait", wait);
    const yes = resumed('"yes"');
    const a = await ctl.claim(prefix, "t-once", "w-a", 300);
    expect(await runNode(graph(), { saver: saverOf(a), exit: false, env: {}, input: {} })).toMatchObject({ code: 0, waiting: "first?" });
    await answered(a, "wait-1");
    // Every attempt after the resume holds wait-1's answer: b answers, then crashes ...
    const b = await ctl.takeover(prefix, a, "w-b", 300);
    expect((await runNode(graph(), { saver: saverOf(b), exit: false, env: yes })).code).toBe(1);
    // ... c goes on and reaches the second question ...
    const c = await ctl.takeover(prefix, b, "w-c", 300);
    expect(await runNode(graph(), { saver: saverOf(c), exit: false, env: yes })).toMatchObject({ code: 0, waiting: "second?" });
    // ... and, its park lost with its attempt, d asks it again: wait-1's answer is not its answer.
    const d = await ctl.takeover(prefix, c, "w-d", 300);
    expect(await runNode(graph(), { saver: saverOf(d), exit: false, env: yes })).toMatchObject({ code: 0, waiting: "second?" });
    expect(ran).toEqual(["first", "first", "middle", "middle", "second"]); // d ran nothing
    // A new wait answered with the same text is a new answer.
    await answered(d, "wait-2");
    const e = await ctl.takeover(prefix, d, "w-e");
    expect((await runNode(graph(), { saver: saverOf(e), exit: false, env: yes })).code).toBe(0);
    expect(printed.at(-1)).toEqual({ log: ["first:yes", "middle", "second:yes"] });
  });

  it("fails the attempt, saying why, when BATON_RESUME_FILE is not JSON", async () => {
    const a = await ctl.claim(prefix, "t-bad", "w-a", 300);
    await runNode(approval([]), { saver: saverOf(a), exit: false, env: {}, input: { change: "v4" } });
    const b = await ctl.takeover(prefix, a, "w-b");
    const out = await runNode(approval([]), { saver: saverOf(b), exit: false, env: resumed("yes please") });
    expect(out.code).toBe(1);
    expect(String(out.error.message)).toMatch(/BATON_RESUME_FILE .* is not JSON/);
    expect(printed).toEqual([]);
  });

  it("starts a new run on a thread left waiting by a cancelled run with its own input, ignoring the interrupt", async () => {
    const i1 = await ctl.claim(prefix, "t-left", "w");
    const ran = [];
    await runNode(approval(ran), { saver: saverOf(i1), exit: false, env: {}, input: { change: "v5" } });
    await ctl.commit(prefix, i1); // i1's run ends (as when cancelled while it waits)
    const i2 = await ctl.claim(prefix, "t-left", "w");
    const out = await runNode(approval(ran), { saver: saverOf(i2), exit: false, env: {}, input: { change: "v6" } });
    expect(out).toMatchObject({ code: 0, resumed: false, waiting: { ask: "deploy v6?" } });
  });
});
