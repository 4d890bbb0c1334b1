// runNode: the whole main program of an agent node.
import { BatonError, EXIT_LEASE_LOST, isFenced } from "./errors.js";
import { BatonSaver, RUN_METADATA_KEY } from "./saver.js";

/** The environment variable whose JSON is the graph's input when runNode is given none. */
export const INPUT_ENV = "GRAPH_INPUT";

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
 * @returns {Promise<{code: number, result?: unknown, error?: unknown, resumed: boolean, done: boolean}>} when exit is false
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
    const final = await quietStdout(async () => {
      const saved = await g.getState({ configurable: { thread_id: thread } });
      const mine = saved?.metadata?.[RUN_METADATA_KEY] === run;
      if (mine && saved.next.length > 0) {
        log(`resuming run ${run} at ${saved.next.join(", ")} (checkpoint ${saved.config.configurable.checkpoint_id})`);
        out.resumed = true;
        return g.invoke(null, config);
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
    const result = options.output ? await options.output(final) : final;
    process.stdout.write(JSON.stringify(result ?? null) + "\n");
    out.result = result;
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
