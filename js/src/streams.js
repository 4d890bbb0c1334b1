// An attempt's stream, in the events LangGraph's server emits
// (docs/graph-workers.md, "Streaming"), as the Python worker's streams.py:
// a mode's chunks named by the mode ("messages" for the SDK's
// messages-tuple), "mode|ns1|ns2" for a subgraph's chunks when the run asks
// for subgraphs, "events" for the callback events, and for the SDK's
// "messages" mode "messages/metadata", "messages/partial" and
// "messages/complete". The graph always streams "values" and "updates"
// too (the attempt needs the state and the interrupts); they are only sent
// when asked for.
import { randomUUID } from "node:crypto";

/** Stream modes an attempt may ask for, by the SDK's names. */
export const SDK_MODES = ["values", "updates", "messages", "messages-tuple", "custom", "tasks", "checkpoints", "debug", "events"];

function cleanConfig(config) {
  if (config && typeof config === "object" && config.configurable && typeof config.configurable === "object") {
    const out = { ...config, configurable: Object.fromEntries(Object.entries(config.configurable).filter(([k]) => !k.startsWith("__"))) };
    delete out.callbacks;
    return out;
  }
  return config;
}

function checkpointOf(config, task = false) {
  const c = config?.configurable;
  if (!c?.thread_id || (!task && !c.checkpoint_id)) return null;
  return { thread_id: c.thread_id, checkpoint_id: c.checkpoint_id ?? null, checkpoint_ns: c.checkpoint_ns || "",
    checkpoint_map: c.checkpoint_map ?? null };
}

function shapeTask(task) {
  if (!task || typeof task !== "object" || !task.state?.configurable || !checkpointOf(task.state, true)) return task;
  const { state, ...rest } = task;
  return { ...rest, checkpoint: checkpointOf(state, true) };
}

function shapeCheckpoint(p) {
  if (!p || typeof p !== "object") return p;
  const parent = p.parent_config ?? p.parentConfig;
  const out = { ...p, checkpoint: checkpointOf(p.config), parent_checkpoint: checkpointOf(parent),
    tasks: (p.tasks ?? []).map(shapeTask) };
  delete out.parentConfig;
  out.config = cleanConfig(out.config);
  out.parent_config = cleanConfig(parent);
  return out;
}

function shape(mode, data) {
  if (mode === "checkpoints") return shapeCheckpoint(data);
  if (mode === "tasks") return shapeTask(data);
  if (mode === "debug" && data && typeof data === "object") {
    if (data.type === "checkpoint") return { ...data, payload: shapeCheckpoint(data.payload) };
    if (data.type === "task_result") return { ...data, payload: shapeTask(data.payload) };
  }
  return data;
}

/**
 * Runs one attempt's graph and sends the events its run asked for. After
 * run(), latest is the last root "values" chunk, asked the interrupts the
 * root reported, and stopped whether shouldStop() ended it at a super-step.
 */
export class Stream {
  constructor(modes, subgraphs, send, shouldStop) {
    this.modes = modes;
    this.subgraphs = subgraphs;
    this.send = send;
    this.shouldStop = shouldStop;
    this.latest = undefined;
    this.asked = [];
    this.stopped = false;
    this.partial = new Map();
    this.complete = new Set();
  }

  graphModes() {
    const lib = this.modes.filter((m) => m !== "events" && m !== "messages" && m !== "messages-tuple");
    if (this.modes.includes("messages-tuple")) lib.push("messages");
    return [...new Set([...lib, "values", "updates"])];
  }

  /** Handles one chunk; true when the attempt stops here. */
  chunk(ns, mode, data) {
    const root = ns.length === 0;
    if (root) {
      if (mode === "updates" && data && typeof data === "object" && "__interrupt__" in data) this.asked.push(...data.__interrupt__);
      else if (mode === "values") {
        this.latest = data;
        if (this.modes.includes("messages")) this.completed(data);
      }
    }
    const wanted = mode === "messages" ? "messages-tuple" : mode;
    if (this.modes.includes(wanted)) {
      this.send(this.subgraphs && !root ? [mode, ...ns].join("|") : mode, shape(mode, data));
    }
    if (root && mode === "values" && this.shouldStop()) {
      this.stopped = true;
      return true;
    }
    return false;
  }

  completed(values) {
    let msgs = values && typeof values === "object" ? values.messages : undefined;
    if (msgs == null) return;
    if (!Array.isArray(msgs)) msgs = [msgs];
    const fresh = [];
    for (const m of msgs) {
      if (!m?.id || this.complete.has(m.id)) continue;
      this.complete.add(m.id);
      fresh.push(m);
    }
    if (fresh.length > 0) this.send("messages/complete", fresh);
  }

  token(event) {
    if (event.tags?.includes("nostream")) return;
    const msg = event.data?.chunk;
    if (!msg?.id) return;
    if (!this.partial.has(msg.id)) {
      this.partial.set(msg.id, msg);
      this.send("messages/metadata", { [msg.id]: { metadata: event.metadata } });
    } else {
      this.partial.set(msg.id, this.partial.get(msg.id).concat(msg));
    }
    this.send("messages/partial", [this.partial.get(msg.id)]);
  }

  async run(graph, what, config, extra) {
    const opts = { ...config, ...extra, streamMode: this.graphModes(), subgraphs: this.subgraphs, durability: "sync" };
    if (!this.modes.includes("events") && !this.modes.includes("messages")) {
      for await (const item of await graph.stream(what, opts)) {
        const [ns, mode, data] = this.subgraphs ? item : [[], ...item];
        if (this.chunk(ns ?? [], mode, data)) return;
      }
      return;
    }
    // The callback events are needed: the SDK's "events", or the tokens
    // of its "messages" mode (LangGraph's server does the same).
    const runId = opts.runId ?? randomUUID();
    for await (const ev of graph.streamEvents(what, { ...opts, runId, version: "v2" })) {
      if (ev.tags?.includes("langsmith:hidden")) continue;
      if (ev.event === "on_chain_stream" && ev.run_id === runId) {
        const [ns, mode, data] = this.subgraphs ? ev.data.chunk : [[], ...ev.data.chunk];
        if (this.chunk(ns ?? [], mode, data)) return;
        continue;
      }
      if (this.modes.includes("events")) this.send("events", ev);
      if (this.modes.includes("messages") && ev.event === "on_chat_model_stream") this.token(ev);
    }
  }
}
