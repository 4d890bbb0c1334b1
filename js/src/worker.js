// The graph worker for LangGraph.js projects: `node [--import tsx]
// node_modules/@baton/langgraph-saver/src/worker.js`, a long-lived process
// a baton runner starts (LANGGRAPH_CONFIG) to run the project's .js, .mjs,
// .ts and .mts graphs, many attempts at once.
//
// The runner keeps ownership: it claims each node, renews its lease,
// commits its outcome and cancels it. This process only runs graphs. It
// speaks JSON lines on stdin and stdout, the protocol of the Python worker
// (docs/graph-workers.md); what graphs print goes to stderr. Every
// checkpoint an attempt writes goes through a BatonSaver holding that
// attempt's lease, so the store refuses a write from an attempt whose claim
// is gone.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { writeSync } from "node:fs";

import { Command } from "@langchain/langgraph";
import { Redis } from "ioredis";

import { BatonError, isFenced } from "./errors.js";
import { waitRequest } from "./node.js";
import { BatonSaver, RESUME_METADATA_KEY, RUN_METADATA_KEY } from "./saver.js";
import { BatonStore } from "./store.js";

/** Stream modes an attempt may ask for (SDK names) and the graph's mode each is. */
const MODES = {
  values: "values", updates: "updates", messages: "messages", "messages-tuple": "messages",
  custom: "custom", tasks: "tasks", checkpoints: "checkpoints", debug: "debug",
};

// The protocol keeps fd 1; what the graphs print goes to stderr.
const OUT = 1;
console.log = console.info = console.debug = (...a) => console.error(...a);
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);

/** A message as the Python worker writes one (model_dump's fields), not LangChain's constructor form. */
function messageDict(m) {
  const type = typeof m.getType === "function" ? m.getType() : m._getType();
  return { type: m.constructor?.name?.endsWith("Chunk") ? `${type === "ai" ? "AI" : type}MessageChunk` : type,
    content: m.content, id: m.id, name: m.name, additional_kwargs: m.additional_kwargs,
    response_metadata: m.response_metadata, tool_calls: m.tool_calls, tool_call_chunks: m.tool_call_chunks,
    tool_call_id: m.tool_call_id, usage_metadata: m.usage_metadata };
}

function replacer(key, value) {
  const orig = this[key];
  if (orig && typeof orig === "object" && (typeof orig._getType === "function" || typeof orig.getType === "function") &&
      "content" in orig) {
    return messageDict(orig);
  }
  return value;
}

function send(msg) {
  let line;
  try {
    line = JSON.stringify(msg, replacer);
  } catch (err) {
    line = JSON.stringify({ type: "error", id: msg.id, permanent: true,
      error: `baton: graph worker: ${msg.type} is not JSON: ${err.message}` });
  }
  writeSync(OUT, line + "\n");
}

function isCompiled(v) {
  return v && typeof v.invoke === "function" && typeof v.getState === "function" && typeof v.stream === "function";
}

function isBuilder(v) {
  return v && typeof v.compile === "function" && typeof v.invoke !== "function";
}

/** Imports "/abs/file.mts:attr"; its value is a compiled graph, a StateGraph, or a function returning either. */
async function load(id, ref) {
  const i = ref.lastIndexOf(":");
  const file = ref.slice(0, i);
  const attr = ref.slice(i + 1);
  const mod = await import(pathToFileURL(file).href);
  if (!(attr in mod)) throw new BatonError(`baton: graph ${JSON.stringify(id)}: ${file} has no export ${JSON.stringify(attr)}`);
  const value = mod[attr];
  if (!isCompiled(value) && !isBuilder(value) && typeof value !== "function") {
    throw new BatonError(`baton: graph ${JSON.stringify(id)}: ${file}:${attr} is neither a graph nor a function returning one`);
  }
  const own = isCompiled(value) && value.checkpointer && typeof value.checkpointer === "object";
  if (own) {
    console.error(`baton: graph ${JSON.stringify(id)} was compiled with a checkpointer of its own ` +
      `(${value.checkpointer.constructor?.name}); baton replaces it with its fenced saver, as LangGraph's server does`);
  }
  return { id, value };
}

/** The graph for one attempt, with saver as its checkpointer: a copy, so attempts never share one. */
async function graphFor(spec, config, saver, store) {
  let g = spec.value;
  if (!isCompiled(g) && !isBuilder(g)) {
    g = await g(config);
  }
  if (isBuilder(g)) return g.compile({ checkpointer: saver, store });
  if (!isCompiled(g)) throw new BatonError(`baton: graph ${JSON.stringify(spec.id)}: its function returned no graph`);
  const copy = g.withConfig({});
  copy.checkpointer = saver;
  copy.store = store;
  return copy;
}

function pending(state) {
  return (state?.tasks ?? []).flatMap((t) => t.interrupts ?? []);
}

class Worker {
  constructor(init) {
    if (!init.redis_url) throw new BatonError("baton: graph worker: init has no redis_url");
    this.redis = new Redis(init.redis_url);
    this.prefix = init.prefix || "baton";
    // Every graph's store (config.store in a node), as LangGraph's server
    // injects its own: baton's, on Redis, shared with /store.
    this.store = new BatonStore({ redis: this.redis, prefix: this.prefix });
    this.graphs = new Map();
    this.attempts = new Map();
  }

  handle(msg) {
    if (msg.type === "run" && typeof msg.id === "string") {
      const att = { id: msg.id, msg, stop: false, abort: new AbortController() };
      this.attempts.set(msg.id, att);
      this.serve(att);
    } else if (msg.type === "cancel" && this.attempts.has(msg.id)) {
      this.attempts.get(msg.id).abort.abort(new Error(msg.reason || "cancelled by the runner"));
    } else if (msg.type === "stop" && this.attempts.has(msg.id)) {
      this.attempts.get(msg.id).stop = true;
    }
  }

  async serve(att) {
    let out;
    try {
      out = await this.attempt(att);
    } catch (err) {
      if (att.abort.signal.aborted) out = { type: "cancelled" };
      else if (isFenced(err) || isFenced(err?.cause)) out = { type: "lost", error: `${err?.name}: ${err?.message}` };
      else out = { type: "error", error: `${err?.name ?? "Error"}: ${err?.message ?? err}`, traceback: String(err?.stack ?? ""),
        permanent: err instanceof BatonError && !isFenced(err) };
    } finally {
      this.attempts.delete(att.id);
    }
    send({ ...out, id: att.id });
  }

  async attempt(att) {
    const msg = att.msg;
    const spec = this.graphs.get(msg.graph);
    if (!spec) {
      throw new BatonError(`baton: unknown graph ${JSON.stringify(msg.graph)} (this worker serves: ${[...this.graphs.keys()].sort().join(", ")})`);
    }
    const modes = (msg.stream_mode ?? []).map((m) => MODES[m]);
    const lease = { thread: msg.thread, run: msg.run, incarnation: msg.incarnation ?? "", node: msg.node,
      epoch: msg.epoch, claim: msg.claim, worker: msg.worker };
    const saver = new BatonSaver({ redis: this.redis, prefix: this.prefix, lease });
    const cfg = { ...(msg.config ?? {}) };
    cfg.configurable = { ...cfg.configurable, thread_id: lease.thread };
    cfg.metadata = { ...cfg.metadata, [RUN_METADATA_KEY]: lease.run };
    const graph = await graphFor(spec, cfg, saver, this.store);
    const state = await graph.getState({ configurable: { thread_id: lease.thread } });
    const mine = state?.metadata?.[RUN_METADATA_KEY] === lease.run;
    let what;
    if (mine && !(state.next?.length > 0)) return { type: "done", result: state.values };
    if (mine) {
      const resume = msg.resume;
      if (resume?.wait) cfg.metadata = { ...cfg.metadata, [RESUME_METADATA_KEY]: resume.wait };
      const asked = pending(state);
      if (asked.length === 0) what = null;
      else if (!resume || (resume.wait && state.metadata?.[RESUME_METADATA_KEY] === resume.wait)) {
        return { type: "interrupt", request: waitRequest(asked) };
      } else what = new Command({ resume: resume.value });
    } else if (msg.command) {
      if ("resume" in msg.command && pending(state).length === 0) {
        throw new BatonError(`baton: Command(resume) for thread ${JSON.stringify(lease.thread)}, which is stopped on no interrupt`);
      }
      what = new Command(msg.command);
    } else {
      what = "input" in msg ? msg.input : {};
    }
    const internal = [...new Set([...modes, "values", "updates"])];
    let latest;
    const asked = [];
    const stream = await graph.stream(what, { ...cfg, streamMode: internal, durability: "sync", signal: att.abort.signal });
    for await (const [mode, data] of stream) {
      if (mode === "updates" && data && typeof data === "object" && "__interrupt__" in data) asked.push(...data.__interrupt__);
      else if (mode === "values") latest = data;
      if (modes.includes(mode)) send({ type: "chunk", id: att.id, event: mode, data });
      if (att.stop && mode === "values") return { type: "stopped" };
    }
    if (asked.length > 0) return { type: "interrupt", request: waitRequest(asked) };
    if (latest === undefined) latest = (await graph.getState({ configurable: { thread_id: lease.thread } })).values;
    return { type: "done", result: latest };
  }
}

async function main() {
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
  let worker;
  for await (const line of lines) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch (err) {
      console.error(`baton: graph worker: a line from the runner is not JSON: ${err.message}`);
      continue;
    }
    if (!worker) {
      try {
        worker = new Worker(msg);
        for (const [id, ref] of Object.entries(msg.graphs ?? {})) worker.graphs.set(id, await load(id, ref));
      } catch (err) {
        send({ type: "fatal", error: `${err?.name ?? "Error"}: ${err?.message ?? err}`, traceback: String(err?.stack ?? "") });
        process.exit(3);
      }
      send({ type: "ready", pid: process.pid, graphs: [...worker.graphs.keys()].sort() });
      continue;
    }
    worker.handle(msg);
  }
  // stdin closed: the runner is gone, and with it every lease.
  for (const att of worker?.attempts.values() ?? []) att.abort.abort(new Error("the runner closed the channel"));
  process.exit(0);
}

process.on("SIGINT", () => {}); // the runner decides when this process ends
main();
