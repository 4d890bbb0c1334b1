// A LangGraph.js agent run as a baton exec node: `node agent.mjs`.
//
// The graph has six deterministic steps (no LLM: each step derives its part
// from the previous ones) and checkpoints after every super-step in baton's
// fenced store, through BatonSaver.fromEnv(). Any attempt of the node, on
// any worker, resumes from the last checkpoint; a worker that lost its node
// (paused past its lease, then taken over) has its next write refused and
// stops, so the thread's state is only ever advanced by the current owner.
//
// Input (the node's input.env): AGENT_TOPIC (default "fencing"),
// AGENT_STEP_MS (how long each step works, default 200). Output: the final
// state as one JSON line on stdout, which becomes the node's result.
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

import { BatonSaver, isFenced } from "@baton/langgraph-saver";

const saver = BatonSaver.fromEnv(); // BATON_REDIS_URL, BATON_PREFIX, the lease, the thread
const stepMs = Number(process.env.AGENT_STEP_MS ?? 200);
const me = { epoch: Number(process.env.BATON_EPOCH), worker: process.env.BATON_WORKER_ID, pid: process.pid };
const log = (msg) => process.stderr.write(`agent[e${me.epoch} ${me.worker} pid ${me.pid}]: ${msg}\n`);

const State = Annotation.Root({
  run: Annotation(),
  topic: Annotation(),
  // Who ran each step: the epoch shows which claim computed it.
  steps: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  outline: Annotation(),
  facts: Annotation(),
  draft: Annotation(),
  review: Annotation(),
  summary: Annotation(),
});

const STEPS = ["plan", "research", "analyze", "write", "check", "publish"];

/** A step: works for stepMs (a tool call, an LLM turn), then returns its part of the state. */
function step(name, compute) {
  return async (state) => {
    await new Promise((r) => setTimeout(r, stepMs));
    const part = compute(state);
    process.stdout.write(`::progress ${Math.round(((STEPS.indexOf(name) + 1) * 100) / STEPS.length)}\n`);
    log(`step ${name} done`);
    return { ...part, steps: [{ step: name, ...me }] };
  };
}

const graph = new StateGraph(State)
  .addNode("plan", step("plan", (s) => ({ outline: ["why", "how", "limits"].map((h) => `${h} ${s.topic}`) })))
  .addNode("research", step("research", (s) => ({ facts: s.outline.map((h, i) => `${h}: fact ${i + 1}`) })))
  .addNode("analyze", step("analyze", (s) => ({ facts: [...s.facts, `${s.facts.length} facts, ${s.topic.length} letters`] })))
  .addNode("write", step("write", (s) => ({ draft: s.facts.join("; ") })))
  .addNode("check", step("check", (s) => ({ review: s.draft.length > 10 ? "approved" : "too short" })))
  .addNode("publish", step("publish", (s) => ({ summary: `${s.topic}: ${s.review}, ${s.draft.length} chars` })))
  .addEdge(START, "plan")
  .addEdge("plan", "research")
  .addEdge("research", "analyze")
  .addEdge("analyze", "write")
  .addEdge("write", "check")
  .addEdge("check", "publish")
  .addEdge("publish", END)
  .compile({ checkpointer: saver });

// thread_id is the run's thread: baton's checkpoints belong to it. "sync"
// durability saves each super-step before the next starts, and the saver's
// signal stops the graph at once if a write is refused.
const config = { configurable: { thread_id: saver.lease.thread }, durability: "sync", signal: saver.signal };
const run = process.env.BATON_RUN_ID;

try {
  const saved = await graph.getState(config);
  let final;
  if (saved.values?.run === run && saved.next.length > 0) {
    log(`resuming at ${saved.next.join(",")} from checkpoint ${saved.config.configurable.checkpoint_id}`);
    final = await graph.invoke(null, config);
  } else if (saved.values?.run === run) {
    log("this run's graph already finished; its state is the result");
    final = saved.values;
  } else {
    log("starting the graph");
    final = await graph.invoke({ run, topic: process.env.AGENT_TOPIC ?? "fencing" }, config);
  }
  process.stdout.write(JSON.stringify(final) + "\n");
} catch (err) {
  if (isFenced(err) || isFenced(err?.cause) || isFenced(saver.signal.reason)) {
    log(`stopped: ${saver.signal.reason?.message ?? err.message}`);
    process.exitCode = 3;
  } else {
    throw err;
  }
} finally {
  await saver.close();
}
