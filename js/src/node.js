// runNode: the whole main program of an agent node.
import { readFileSync } from "node:fs";

import { Command } from "@langchain/langgraph";

import { BatonError, EXIT_LEASE_LOST, isFenced } from "./errors.js";
import { BatonSaver, RESUME_METADATA_KEY, RUN_METADATA_KEY } from "./saver.js";

/** The environment variable whose JSON is the graph's input when runNode is given none. */
export const INPUT_ENV = "GRAPH_INPUT";

/**
 * The environment variable the exec kind sets, on the attempt after a
 * resume, to a file holding the resume's value (JSON).
 */
export const RESUME_ENV = "BATON_RESUME_FILE";

/**
 * The wait request for the interrupts a graph stopped on, the JSON of the
 * "::wait" line that parks the node: one interrupt's value as it is (what
 * `interrupt(value)` was called with); several (parallel nodes each
 * asking) as `{"interrupts": [{"id", "value"}, ...]}`, answered by a resume
 * whose value maps each interrupt id to its answer.
 */
export function waitRequest(interrupts) {
  if (interrupts.length === 1) return interrupts[0].value ?? null;
  return { interrupts: interrupts.map((i) => ({ id: i.id, value: i.value ?? null })) };
}

/** The interrupts a saved state is stopped on (its tasks' pending interrupts). */
function pendingInterrupts(state) {
  return (state?.tasks ?? []).flatMap((t) => t.interrupts ?? []);
}

/** The resume's value from BATON_RESUME_FILE: {value}, or undefined when unset. */
function resumeOf(env) {
  const path = env[RESUME_ENV];
  if (!path) return undefined;
  let text;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new BatonError(`baton: runNode: ${RESUME_ENV}: ${err.message}`);
  }
  try {
    return { value: JSON.parse(text) };
  } catch (err) {
    throw new BatonError(`baton: runNode: ${RESUME_ENV} ${path} is not JSON: ${err.message}`);
  }
}

/**
 * Reports the node's progress (0-100) to the runner: a "::progress N" line
 * on stdout, which runNode lets through while the graph runs.
 */
export function progress(percent) {
  process.stdout.write(`::progress ${Math.max(0, Math.min(100, Math.round(percent)))}\n`);
}

/**
 * Sends what the graph prints to stderr while fn runs, so that stdout holds
 * only the node's result; "::" lines (::progress, ::checkpoint) still reach
 * the runner.
 */
async function quietStdout(fn) {
  const out = process.stdout;
  const write = out.write;
  out.write = function (chunk, ...rest) {
    const text = typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    if (text.startsWith("::")) return write.call(out, chunk, ...rest);
    return process.stderr.write(chunk, ...rest);
  };
  try {
    return await fn();
  } finally {
    out.write = write;
  }
}

function inputOf(input, env) {
  if (typeof input === "function") return input(env);
  if (input !== undefined) return input;
  const raw = env[INPUT_ENV];
  if (raw === undefined) return {};
  try {
    return JSON.parse(raw);
  } catch (err) {
    throw new BatonError(`baton: runNode: ${INPUT_ENV} is not JSON: ${err.message}`);
  }
}

/**
 * Runs a LangGraph graph as one baton exec node, from start to exit:
 *
 * - the saver is `BatonSaver.fromEnv()` (or `options.saver`), and the
 *   thread is the node's run's thread (BATON_THREAD_ID);
 * - it decides from who wrote the thread's newest checkpoint (its metadata's
 *   `baton_run`): written by this same run, and the graph has a next step,
 *   it resumes (`invoke(null)`): an earlier attempt of this node stopped
 *   there (a takeover, a retry, a shutdown). Written by this run with no
 *   next step, the graph already finished (its runner stopped before the
 *   commit): it is not run again, and its state is the result. Anything
 *   else (no checkpoint, another run's) starts the graph with this run's
 *   input, on the thread's state;
 * - a graph that stops on LangGraph's `interrupt(value)` parks the node:
 *   runNode prints `::wait <request>` (waitRequest: the interrupt's value)
 *   instead of a result and exits 0; the node is WAITING, with no lease and
 *   no worker, until a resume. The attempt after the resume finds the value
 *   in BATON_RESUME_FILE and resumes the graph with
 *   `new Command({ resume: value })`, where it stopped (only a graph this
 *   run started, stopped on an interrupt). The checkpoints written with
 *   that value record the wait it answers (metadata `baton_resume`), so
 *   that it answers one interrupt only. Without a resume, or with one
 *   already given (the park was lost with its attempt), a graph stopped on
 *   an interrupt asks again, running nothing;
 * - it invokes with `durability: "sync"` (each super-step saved before the
 *   next starts) and the saver's `signal`;
 * - it prints the result (the final state, or `options.output(state)`) as
 *   one JSON line on stdout, the node's result; what the graph prints goes
 *   to stderr meanwhile (`progress(pct)` still reaches the runner);
 * - a lost lease (a refused write, or the claim watch) ends the process
 *   with code 75, EXIT_LEASE_LOST, which the exec kind records as a lost
 *   attempt; any other error is printed and exits 1, a failed attempt;
 * - it closes the saver and, unless `options.exit` is false, ends the
 *   process with its code, so nothing the graph left open (an HTTP agent,
 *   a timer) keeps the node from ending.
 *
 * @param {object} graph a StateGraph (compiled here with the saver), or a compiled graph (its checkpointer is set to the saver)
 * @param {object} [options]
 * @param {unknown | ((env: Record<string, string|undefined>) => unknown)} [options.input] the graph's input for a fresh start, or a function of the environment that makes it; default the JSON in GRAPH_INPUT, or {}
 * @param {(state: any) => unknown} [options.output] what to print of the final state; default the state
 * @param {object} [options.config] more of invoke's config (recursionLimit, configurable keys, callbacks); thread_id, durability and signal are runNode's
 * @param {BatonSaver} [options.saver] default BatonSaver.fromEnv()
 * @param {boolean} [options.exit] end the process when done (default true)
 * @param {Record<string, string|undefined>} [options.env] default process.env
 * @returns {Promise<{code: number, result?: unknown, waiting?: unknown, error?: unknown, resumed: boolean, done: boolean}>} when exit is false; waiting is the request of a graph stopped on interrupt()
 */
export async function runNode(graph, options = {}) {
  const env = options.env ?? process.env;
  const exit = options.exit ?? true;
  const saver = options.saver ?? BatonSaver.fromEnv({}, env);
  const log = (msg) => process.stderr.write(`baton runNode: ${msg}\n`);
  let out = { code: 0, resumed: false, done: false };
  try {
    const g = compiled(graph, saver);
    const thread = saver.lease.thread;
    const run = saver.lease.run;
    const config = {
      ...options.config,
      configurable: { ...options.config?.configurable, thread_id: thread },
      durability: "sync",
      signal: saver.signal,
    };
    let asked = [];
    const final = await quietStdout(async () => {
      const saved = await g.getState({ configurable: { thread_id: thread } });
      const mine = saved?.metadata?.[RUN_METADATA_KEY] === run;
      if (mine && saved.next.length > 0) {
        const at = `${saved.next.join(", ")} (checkpoint ${saved.config.configurable.checkpoint_id})`;
        const pending = pendingInterrupts(saved);
        let resume = resumeOf(env);
        let resumed = config;
        if (resume !== undefined) {
          // The same answer comes with every attempt until the node parks
          // again. Every checkpoint written by an attempt that holds it
          // records its wait: such a checkpoint's interrupt came after the
          // answer was given, and is not answered by it.
          resume.wait = await saver.resumedWait();
          if (resume.wait !== null) {
            resumed = { ...config, configurable: { ...config.configurable, [RESUME_METADATA_KEY]: resume.wait } };
            if (saved.metadata?.[RESUME_METADATA_KEY] === resume.wait) resume = undefined;
          }
        }
        if (pending.length > 0 && resume === undefined) {
          // Stopped on interrupt() and not answered yet (the park was lost
          // with its attempt): ask again, without running anything.
          log(`run ${run} waits at ${at}; parking again`);
          asked = pending;
          return undefined;
        }
        out.resumed = true;
        if (pending.length > 0) {
          log(`resuming run ${run} at ${at} with the resume's value`);
          return g.invoke(new Command({ resume: resume.value }), resumed);
        }
        log(`resuming run ${run} at ${at}`);
        return g.invoke(null, resumed);
      }
      if (mine) {
        log(`run ${run} already finished its graph; its state is the result`);
        out.done = true;
        return saved.values;
      }
      const input = await inputOf(options.input, env);
      log(`starting the graph for run ${run} on thread ${thread}`);
      return g.invoke(input, config);
    });
    if (asked.length === 0 && !out.done) {
      asked = final?.__interrupt__ ?? pendingInterrupts(await g.getState({ configurable: { thread_id: thread } }));
    }
    if (asked.length > 0) {
      // interrupt(): park the node with the question; a resume's value
      // comes back in BATON_RESUME_FILE, for Command({ resume }).
      const request = waitRequest(asked);
      log(`run ${run} waits for a resume: ${JSON.stringify(request).slice(0, 200)}`);
      process.stdout.write(`::wait ${JSON.stringify(request)}\n`);
      out.waiting = request;
    } else {
      const result = options.output ? await options.output(final) : final;
      process.stdout.write(JSON.stringify(result ?? null) + "\n");
      out.result = result;
    }
  } catch (err) {
    const lost = saver.lost ?? (isFenced(err) ? err : isFenced(err?.cause) ? err.cause : undefined);
    if (lost) {
      log(`stopped: ${lost.message}`);
      out = { ...out, code: EXIT_LEASE_LOST, error: lost };
    } else {
      log(`failed: ${err?.stack ?? err}`);
      out = { ...out, code: 1, error: err };
    }
  } finally {
    if (!options.saver) await saver.close();
  }
  if (exit) process.exit(out.code);
  return out;
}

/** The graph compiled with saver as its checkpointer. */
function compiled(graph, saver) {
  if (graph && typeof graph.invoke !== "function" && typeof graph.compile === "function") {
    return graph.compile({ checkpointer: saver });
  }
  if (!graph || typeof graph.invoke !== "function" || typeof graph.getState !== "function") {
    throw new TypeError("runNode: want a StateGraph or a compiled graph");
  }
  graph.checkpointer = saver;
  return graph;
}
