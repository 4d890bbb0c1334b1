// A LangGraph.js agent run as a baton exec node: `node agent.mjs`.
//
// The graph has six deterministic steps (no LLM: each step derives its part
// from the previous ones). runNode is its whole main program: it checkpoints
// every super-step in baton's fenced store (BatonSaver.fromEnv()), resumes
// where an earlier attempt of this run stopped (a takeover, a retry, a
// shutdown), prints the final state as the node's result, and ends the
// process with code 75 when its lease is gone (its runner paused past the
// lease, the node taken over, the run cancelled), even in the middle of a
// step.
//
// Input (the node's input.env): AGENT_TOPIC (default "fencing"),
// AGENT_STEP_MS (how long each step works, default 200).
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

import { runNode } from "@baton/langgraph-saver";

const stepMs = Number(process.env.AGENT_STEP_MS ?? 200);
const me = { epoch: Number(process.env.BATON_EPOCH), worker: process.env.BATON_WORKER_ID, pid: process.pid };
const log = (msg) => process.stderr.write(`agent[e${me.epoch} ${me.worker} pid ${me.pid}]: ${msg}\n`);

const State = Annotation.Root({
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
  .addEdge("publish", END);

await runNode(graph, { input: (env) => ({ topic: env.AGENT_TOPIC ?? "fencing" }) });
