// The Agent Server API's run fields in the JS graph worker, as the Python
// worker's runs.py (docs/graph-workers.md, "The node kind graph"): the
// attempt's config as LangGraph's server builds it, time travel
// (checkpoint_id), breakpoints met again after a retry, the interrupts a
// command.resume answers (resumes), and update_state.
import { createRequire } from "node:module";

import { BatonError } from "./errors.js";
import { RUN_METADATA_KEY } from "./saver.js";

function pending(state) {
  return (state?.tasks ?? []).flatMap((t) => t.interrupts ?? []);
}

/** What LangGraph's server adds to a run's config.metadata. */
const SERVER_METADATA = { langgraph_version: langgraphVersion(), langgraph_plan: "developer", langgraph_host: "self-hosted" };

function langgraphVersion() {
  try {
    return createRequire(import.meta.url)("@langchain/langgraph/package.json").version;
  } catch {
    return "0.0.0";
  }
}

/**
 * The attempt's config: the run's config, on the run's thread, with the
 * run's metadata (as LangGraph's server passes it) and what baton's plan reads.
 */
export function runConfig(msg, lease) {
  const cfg = { ...(msg.config ?? {}) };
  const { checkpoint_id: cid, ...conf } = cfg.configurable ?? {};
  // A checkpoint_id in the config is the run's checkpoint_id: the plan
  // reads the thread's head, and only a run's start goes to the past.
  if (cid && !msg.checkpoint_id) msg.checkpoint_id = cid;
  // graph_id, assistant_id and run_id go in configurable, as the reference
  // server's runs carry them.
  const ids = { graph_id: msg.graph, ...(msg.assistant_id ? { assistant_id: msg.assistant_id } : {}) };
  cfg.configurable = { ...conf, ...ids, run_id: lease.run, thread_id: lease.thread };
  const meta = { ...cfg.metadata, ...(msg.metadata ?? {}), ...ids, run_attempt: msg.attempt, ...SERVER_METADATA };
  cfg.metadata = { ...meta, [RUN_METADATA_KEY]: lease.run };
  return cfg;
}

/**
 * Whether the run's own latest checkpoint is where its interrupt_before (a
 * next node) or interrupt_after (a node of the step that wrote it) stops
 * the graph: going on from it with null would pass the breakpoint.
 */
export async function atBreakpoint(graph, state, msg) {
  const before = msg.interrupt_before;
  const after = msg.interrupt_after;
  const next = state.next ?? [];
  if (next.length > 0 && (before === "*" || (Array.isArray(before) && next.some((n) => before.includes(n))))) return true;
  if (!after || !state.parentConfig) return false;
  const ran = (await graph.getState(state.parentConfig)).next ?? [];
  return ran.length > 0 && (after === "*" || ran.some((n) => after.includes(n)));
}

/** Points cfg at a past checkpoint of the thread (time travel), which must exist. */
export async function atCheckpoint(saver, cfg, checkpointId) {
  cfg.configurable = { ...cfg.configurable, checkpoint_id: checkpointId };
  const at = { configurable: { thread_id: cfg.configurable.thread_id, checkpoint_ns: "", checkpoint_id: checkpointId } };
  if (!(await saver.getTuple(at))) {
    throw new BatonError(`baton: checkpoint_id ${JSON.stringify(checkpointId)}: thread ${JSON.stringify(cfg.configurable.thread_id)} has no such checkpoint`);
  }
}

/**
 * A command.resume naming the interrupts it answers (resumes) continues
 * only while one of them is pending: two runs answering the same interrupt
 * one after the other continue it once.
 */
export function checkResumes(state, msg, thread) {
  const want = msg.resumes;
  if (!want?.length) return;
  const ids = pending(state).map((i) => i.id);
  if (ids.length === 0) {
    throw new BatonError(`baton: thread ${JSON.stringify(thread)} has no interrupt: interrupt ${want.join(", ")} was answered already`);
  }
  if (!want.some((id) => ids.includes(id))) {
    throw new BatonError(`baton: interrupt already answered: ${want.join(", ")} (thread ${JSON.stringify(thread)} is stopped on ${ids.join(", ")})`);
  }
}

/**
 * graph.updateState through the attempt's fenced saver; its result is the
 * checkpoint written. An attempt of a run whose update is the thread's head
 * already (the previous attempt was not committed) answers that checkpoint.
 */
export async function updateState(graph, saver, cfg, u, mineState) {
  if (mineState) return { checkpoint: checkpointRef(mineState.config) };
  const asNode = u.as_node ?? undefined;
  const nodes = Object.keys(graph.nodes ?? {});
  if (asNode !== undefined && !nodes.includes(asNode) && asNode !== "__input__" && asNode !== "__copy__") {
    throw new BatonError(`baton: update_state: as_node ${JSON.stringify(asNode)}: the graph has no such node (its nodes: ${nodes.filter((n) => !n.startsWith("__")).join(", ")})`);
  }
  const ucfg = { ...cfg, configurable: { ...cfg.configurable } };
  if (u.checkpoint_id) await atCheckpoint(saver, ucfg, u.checkpoint_id);
  const written = await graph.updateState(ucfg, u.values ?? null, asNode);
  return { checkpoint: checkpointRef(written) };
}

function checkpointRef(config) {
  const c = config.configurable;
  return { thread_id: c.thread_id, checkpoint_ns: c.checkpoint_ns || "", checkpoint_id: c.checkpoint_id };
}
