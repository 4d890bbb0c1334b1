// The JS graph worker's calls, as the Python worker's calls.py: a
// thread's state and history, the graph's schemas and drawing, answered
// with a read-only saver (every write refused before touching Redis), in
// the JSON shape LangGraph's server answers with. A call takes no
// attempt's slot.
import { BatonError } from "./errors.js";
import { BatonSaver } from "./saver.js";

/** A call that cannot be answered: code "not_found" or "invalid". */
export class CallError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/** An Interrupt as LangGraph's server shows it: {id, value}. */
export function interruptJSON(i) {
  return { id: i?.id ?? null, value: i?.value ?? null };
}

function checkpointJSON(config) {
  const c = config?.configurable;
  if (!c?.thread_id || !c.checkpoint_id) return null;
  return { thread_id: c.thread_id, checkpoint_ns: c.checkpoint_ns || "", checkpoint_id: c.checkpoint_id,
    checkpoint_map: c.checkpoint_map ?? null };
}

function isSnapshot(v) {
  return v && typeof v === "object" && "values" in v && "next" in v && "tasks" in v;
}

/** A StateSnapshot as the API's ThreadState. */
export function threadState(s) {
  const tasks = (s.tasks ?? []).map((t) => ({
    id: t.id, name: t.name, path: t.path ?? [],
    error: t.error == null ? null : typeof t.error === "string" ? t.error : `${t.error.name ?? "Error"}: ${t.error.message ?? t.error}`,
    interrupts: (t.interrupts ?? []).map(interruptJSON),
    checkpoint: t.state != null && !isSnapshot(t.state) && t.state.configurable
      ? { thread_id: t.state.configurable.thread_id, checkpoint_ns: t.state.configurable.checkpoint_ns || "",
        checkpoint_id: t.state.configurable.checkpoint_id ?? null, checkpoint_map: t.state.configurable.checkpoint_map ?? null }
      : null,
    state: isSnapshot(t.state) ? threadState(t.state) : null,
    result: t.result ?? null,
  }));
  return {
    values: s.values ?? {}, next: [...(s.next ?? [])], tasks, metadata: s.metadata ?? null,
    created_at: s.createdAt ?? null, checkpoint: checkpointJSON(s.config), parent_checkpoint: checkpointJSON(s.parentConfig),
    interrupts: (s.tasks ?? []).flatMap((t) => t.interrupts ?? []).map(interruptJSON),
  };
}

function str(args, name, required = false) {
  const v = args[name];
  if (v == null && !required) return undefined;
  if (typeof v !== "string" || v === "") throw new CallError("invalid", `${name}: want a non-empty string, got ${JSON.stringify(v)}`);
  return v;
}

function configOf(args) {
  const conf = { thread_id: str(args, "thread", true), checkpoint_ns: "" };
  const cp = args.checkpoint;
  if (cp != null) {
    if (typeof cp !== "object" || Array.isArray(cp)) throw new CallError("invalid", `checkpoint: want an object {checkpoint_id, checkpoint_ns}, got ${JSON.stringify(cp)}`);
    for (const k of ["checkpoint_id", "checkpoint_ns", "checkpoint_map"]) if (cp[k] != null) conf[k] = cp[k];
  }
  const id = str(args, "checkpoint_id");
  if (id) conf.checkpoint_id = id;
  return { configurable: conf };
}

async function mustExist(saver, config) {
  const c = config.configurable;
  if (c.checkpoint_id && !(await saver.getTuple(config))) {
    throw new CallError("not_found", `thread ${JSON.stringify(c.thread_id)} has no checkpoint ${JSON.stringify(c.checkpoint_id)}`);
  }
}

async function getState(graph, saver, args) {
  const config = configOf(args);
  await mustExist(saver, config);
  return threadState(await graph.getState(config, { subgraphs: Boolean(args.subgraphs) }));
}

async function history(graph, args) {
  const config = configOf(args);
  const limit = args.limit ?? 10;
  if (!Number.isInteger(limit) || limit < 1) throw new CallError("invalid", `limit: want a positive integer, got ${JSON.stringify(limit)}`);
  let before = args.before;
  if (typeof before === "string") before = { configurable: { checkpoint_id: before } };
  else if (before && typeof before === "object") before = before.configurable ? before : { configurable: before };
  else if (before != null) throw new CallError("invalid", `before: want a checkpoint id or a checkpoint object, got ${JSON.stringify(before)}`);
  const meta = args.metadata;
  if (meta != null && (typeof meta !== "object" || Array.isArray(meta))) throw new CallError("invalid", `metadata: want an object, got ${JSON.stringify(meta)}`);
  const out = [];
  for await (const s of graph.getStateHistory(config, { filter: meta ?? undefined, before: before ?? undefined, limit })) {
    out.push(threadState(s));
  }
  return out;
}

function loose(title, keys) {
  return { title, type: "object", properties: Object.fromEntries(keys.map((k) => [k, {}])) };
}

function fields(def, fallback) {
  const keys = def && typeof def === "object" ? Object.keys(def) : [];
  return keys.length > 0 ? keys : fallback;
}

/**
 * LangGraph.js keeps no JSON schema on a compiled graph (the reference
 * server derives them from the TypeScript source): a schema naming the
 * graph's fields, any value for each, as the Python worker's fallback.
 */
function schemas(graphId, graph) {
  const state = (Array.isArray(graph?.streamChannels) ? graph.streamChannels : Object.keys(graph?.channels ?? {}))
    .filter((k) => !k.startsWith("__") && !k.startsWith("branch:"));
  const b = graph?.builder;
  const output = Array.isArray(graph?.outputChannels) ? graph.outputChannels : state;
  return { graph_id: graphId, input_schema: loose("Input", fields(b?._inputDefinition, state)),
    output_schema: loose("Output", fields(b?._outputDefinition, output)), state_schema: loose("State", state),
    config_schema: null, context_schema: null };
}

async function drawing(graph, args) {
  const xray = args.xray ?? false;
  if (typeof xray !== "boolean" && !Number.isInteger(xray)) throw new CallError("invalid", `xray: want true, false or a depth, got ${JSON.stringify(xray)}`);
  const g = typeof graph.getGraphAsync === "function" ? await graph.getGraphAsync({ xray }) : graph.getGraph({ xray });
  return g.toJSON();
}

async function subgraphs(graphId, graph, args) {
  const ns = str(args, "namespace");
  const out = {};
  for await (const [name, sub] of graph.getSubgraphsAsync(ns, Boolean(args.recurse))) out[name] = schemas(graphId, sub);
  return out;
}

/**
 * The answer to one call, or a CallError.
 * @param {{graphs: Map, redis: any, prefix: string}} worker
 * @param {(spec: any, config: any, saver: any) => Promise<any>} graphFor
 */
export async function answer(worker, graphFor, op, args) {
  if (!args || typeof args !== "object" || Array.isArray(args)) throw new CallError("invalid", `args: want an object, got ${JSON.stringify(args)}`);
  const spec = worker.graphs.get(args.graph ?? "");
  if (!spec) {
    throw new CallError("not_found", `unknown graph ${JSON.stringify(args.graph)} (this worker serves: ${[...worker.graphs.keys()].sort().join(", ") || "none"})`);
  }
  const reader = new BatonSaver({ redis: worker.redis, prefix: worker.prefix, leaseFor: async (thread) => {
    throw new BatonError(`baton: this saver is read-only (a call): it cannot write to thread ${JSON.stringify(thread)}`);
  } });
  let graph;
  try {
    graph = await graphFor(spec, { configurable: {} }, reader);
  } catch (err) {
    if (err instanceof BatonError) throw new CallError("invalid", err.message);
    throw err;
  }
  switch (op) {
    case "get_state": return getState(graph, reader, args);
    case "history": return history(graph, args);
    case "schemas": return schemas(spec.id, graph);
    case "graph": return drawing(graph, args);
    case "subgraphs": return subgraphs(spec.id, graph, args);
    default: throw new CallError("invalid", `unknown op ${JSON.stringify(op)} (want get_state, history, schemas, graph, subgraphs)`);
  }
}
