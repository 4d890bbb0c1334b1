// runNode: the whole main program of an agent node.
import { BatonSaver, RUN_METADATA_KEY } from "./saver.js";
import { EXIT_LEASE_LOST, isFenced } from "./errors.js";

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
 *   one JSON line on stdout, the node's result;
 * - a lost lease (a refused write, or the claim watch) ends the process
 *   with code 75, EXIT_LEASE_LOST, which the exec kind records as a lost
 *   attempt; any other error is printed and exits 1, a failed attempt;
 * - it closes the saver and, unless `options.exit` is false, ends the
 *   process with its code, so nothing the graph left open (an HTTP agent,
 *   a timer) keeps the node from ending.
 *
 * @param {object} graph a StateGraph (compiled here with the saver), or a compiled graph (its checkpointer is set to the saver)
 * @param {object} [options]
 * @param {unknown | ((ctx: {env: Record<string, string|undefined>, run: string, thread: string}) => unknown)} [options.input] the graph's input for a fresh start, or a function that makes it; default {}
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
    const saved = await g.getState({ configurable: { thread_id: thread } });
    const mine = saved?.metadata?.[RUN_METADATA_KEY] === run;
    let final;
    if (mine && saved.next.length > 0) {
      log(`resuming run ${run} at ${saved.next.join(", ")} (checkpoint ${saved.config.configurable.checkpoint_id})`);
      out.resumed = true;
      final = await g.invoke(null, config);
    } else if (mine) {
      log(`run ${run} already finished its graph; its state is the result`);
      out.done = true;
      final = saved.values;
    } else {
      const input = typeof options.input === "function" ? await options.input({ env, run, thread }) : (options.input ?? {});
      log(`starting the graph for run ${run} on thread ${thread}`);
      final = await g.invoke(input, config);
    }
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
