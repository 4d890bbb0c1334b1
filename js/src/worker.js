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
import { CallError, answer, interruptJSON } from "./calls.js";
import { atBreakpoint, atCheckpoint, checkResumes, runConfig, updateState } from "./runs.js";
import { SDK_MODES, Stream } from "./streams.js";

/** The longest reply line a call may have, under the runner's line limit. */
const MAX_REPLY = 48 << 20;

// The protocol keeps fd 1; what the graphs print goes to stderr.
const OUT = 1;
console.log = console.info = console.debug = (...a) => console.error(...a);
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);

/**
 * A message as LangGraph's JS server writes one (its serialiseAsDict):
 * toDict()'s data with its type ("human", "ai", ...; a chunk's type is its
 * message's), not LangChain's constructor form.
 */
function messageDict(m) {
  if (typeof m.toDict === "function") {
    const { type, data } = m.toDict();
    return { ...data, type };
  }
  const type = typeof m.getType === "function" ? m.getType() : m._getType();
  return { type, content: m.content, id: m.id, name: m.name, additional_kwargs: m.additional_kwargs,
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

/** replacer, and a repeated object (a cycle in a callback event) as "[Circular]". */
function safeReplacer() {
  const seen = new WeakSet();
  return function (key, value) {
    const v = replacer.call(this, key, value);
    if (v && typeof v === "object") {
      if (seen.has(v)) return "[Circular]";
      seen.add(v);
    }
    return v;
  };
}

function send(msg) {
  let line;
  try {
    line = JSON.stringify(msg, replacer);
  } catch (err) {
    try {
      if (msg.type !== "chunk") throw err;
      line = JSON.stringify(msg, safeReplacer()); // an events chunk's cycles, not a reason to fail the run
    } catch {
      line = JSON.stringify({ type: "error", id: msg.id, permanent: true,
        error: `baton: graph worker: ${msg.type} is not JSON: ${err.message}` });
    }
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
    } else if (msg.type === "call") {
      this.call(msg);
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
    const modes = [...(msg.stream_mode ?? [])];
    const unknown = modes.find((m) => !SDK_MODES.includes(m));
    if (unknown !== undefined) throw new BatonError(`baton: stream_mode ${JSON.stringify(unknown)}: want one of ${SDK_MODES.join(", ")}`);
    const end = msg.interrupts === "end";
    const lease = { thread: msg.thread, run: msg.run, incarnation: msg.incarnation ?? "", node: msg.node,
      epoch: msg.epoch, claim: msg.claim, worker: msg.worker };
    const saver = new BatonSaver({ redis: this.redis, prefix: this.prefix, lease });
    const cfg = runConfig(msg, lease);
    const graph = await graphFor(spec, cfg, saver, this.store);
    const head = { configurable: { thread_id: lease.thread } };
    let state = await graph.getState(head);
    const mine = state?.metadata?.[RUN_METADATA_KEY] === lease.run;
    if (msg.update_state != null) return { type: "done", result: await updateState(graph, saver, cfg, msg.update_state, mine ? state : null) };
    if (!mine && msg.checkpoint_id) {
      await atCheckpoint(saver, cfg, msg.checkpoint_id);
      state = await graph.getState(cfg);
    }
    let what;
    if (mine && !(state.next?.length > 0)) return this.finish(graph, head, end, state.values, []);
    if (mine) {
      const resume = msg.resume;
      if (resume?.wait) cfg.metadata = { ...cfg.metadata, [RESUME_METADATA_KEY]: resume.wait };
      const asked = pending(state);
      if (asked.length === 0) {
        // The previous attempt stopped at interrupt_before/after: so does
        // this one, running nothing.
        if (await atBreakpoint(graph, state, msg)) return this.finish(graph, head, end, state.values, []);
        what = null;
      } else if (!resume || (resume.wait && state.metadata?.[RESUME_METADATA_KEY] === resume.wait)) {
        return this.finish(graph, head, end, state.values, asked);
      } else what = new Command({ resume: resume.value });
    } else if (msg.command) {
      if ("resume" in msg.command && pending(state).length === 0 && !msg.resumes) {
        throw new BatonError(`baton: Command(resume) for thread ${JSON.stringify(lease.thread)}, which is stopped on no interrupt`);
      }
      if ("resume" in msg.command) checkResumes(state, msg, lease.thread);
      what = new Command(msg.command);
    } else {
      what = "input" in msg ? msg.input : {};
    }
    const stream = new Stream(modes, Boolean(msg.subgraphs), (event, data) => send({ type: "chunk", id: att.id, event, data }),
      () => att.stop);
    const extra = { signal: att.abort.signal };
    if (msg.interrupt_before != null) extra.interruptBefore = msg.interrupt_before;
    if (msg.interrupt_after != null) extra.interruptAfter = msg.interrupt_after;
    if (msg.context != null) extra.context = msg.context;
    await stream.run(graph, what, cfg, extra);
    if (stream.stopped) return { type: "stopped" };
    let latest = stream.latest;
    if (latest === undefined && !end) latest = (await graph.getState(head)).values;
    return this.finish(graph, head, end, latest, stream.asked);
  }

  /**
   * The attempt's outcome: by default a park on the interrupts, or the
   * final state; with interrupts "end", {values, interrupts, next} read
   * from the thread's head, whatever stopped the graph.
   */
  async finish(graph, head, end, values, asked) {
    if (!end) {
      if (asked.length > 0) return { type: "interrupt", request: waitRequest(asked) };
      return { type: "done", result: values };
    }
    const state = await graph.getState(head);
    return { type: "done", result: { values: state.values, interrupts: pending(state).map(interruptJSON), next: [...(state.next ?? [])] } };
  }

  /** Answers one call (calls.js) with a reply line. */
  async call(msg) {
    const out = { type: "reply", id: msg.id };
    try {
      out.result = await answer(this, graphFor, msg.op ?? "", msg.args);
    } catch (err) {
      out.error = err instanceof CallError ? err.message : `${err?.name ?? "Error"}: ${err?.message ?? err}`;
      out.code = err instanceof CallError ? err.code : "internal";
    }
    let line;
    try {
      line = JSON.stringify(out, replacer);
    } catch (err) {
      line = JSON.stringify({ type: "reply", id: msg.id, code: "internal", error: `the answer is not JSON: ${err.message}` });
    }
    if (Buffer.byteLength(line) > MAX_REPLY) {
      // The runner reads lines of up to 64 MiB and stops a worker that
      // writes a longer one: a call must not cost the attempts theirs.
      line = JSON.stringify({ type: "reply", id: msg.id, code: "invalid",
        error: `the answer is ${Buffer.byteLength(line)} bytes, over ${MAX_REPLY}: ask for less (limit)` });
    }
    writeSync(OUT, line + "\n");
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
