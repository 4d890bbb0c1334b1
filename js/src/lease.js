// The lease a BatonSaver writes under: one claim of one node, as the exec
// kind hands it to its command in the environment.
import { BatonError } from "./errors.js";
import { validateID } from "./ids.js";

/**
 * @typedef {object} Lease
 * @property {string} thread  the node's thread (BATON_THREAD_ID)
 * @property {string} run     the run (BATON_RUN_ID)
 * @property {string} [incarnation] the run's submission, from the token
 * @property {string} node    the node (BATON_NODE_ID)
 * @property {number} epoch   the fencing epoch of the claim (BATON_EPOCH)
 * @property {string} claim   the claim id, from the token
 * @property {string} worker  the lease owner (BATON_WORKER_ID), recorded by the scripts
 */

/**
 * Parses a fencing token, "run~incarnation/node@epoch/claim" (the
 * incarnation is absent from runs stored before incarnations existed), as
 * fence.ParseToken does.
 */
export function parseToken(token) {
  if (typeof token !== "string") throw new BatonError("baton: fencing token missing");
  const at = token.indexOf("@");
  if (at < 0) throw new BatonError(`baton: token ${JSON.stringify(token)}: missing @epoch`);
  const res = token.slice(0, at);
  const rest = token.slice(at + 1);
  const slash = res.indexOf("/");
  if (slash < 0) throw new BatonError(`baton: token ${JSON.stringify(token)}: resource is not run~incarnation/node`);
  let run = res.slice(0, slash);
  const node = res.slice(slash + 1);
  let incarnation = "";
  const tilde = run.indexOf("~");
  if (tilde >= 0) {
    incarnation = validateID("token incarnation", run.slice(tilde + 1));
    run = run.slice(0, tilde);
  }
  const slash2 = rest.indexOf("/");
  if (slash2 < 0 || slash2 === rest.length - 1) throw new BatonError(`baton: token ${JSON.stringify(token)}: missing /claim`);
  const ep = rest.slice(0, slash2);
  const claim = rest.slice(slash2 + 1);
  if (!/^[0-9]+$/.test(ep) || Number(ep) < 1 || !Number.isSafeInteger(Number(ep))) {
    throw new BatonError(`baton: token ${JSON.stringify(token)}: epoch ${JSON.stringify(ep)} is not a positive integer`);
  }
  validateID("token run", run);
  validateID("token node", node);
  validateID("token claim id", claim);
  return { run, incarnation, node, epoch: Number(ep), claim };
}

/**
 * Reads the lease of the exec node this process runs as: BATON_FENCING_TOKEN
 * (run, incarnation, node, epoch, claim), BATON_THREAD_ID and
 * BATON_WORKER_ID; BATON_RUN_ID, BATON_NODE_ID and BATON_EPOCH must agree
 * with the token.
 * @param {Record<string, string|undefined>} [env]
 * @returns {Lease}
 */
export function leaseFromEnv(env = process.env) {
  const need = (name) => {
    const v = env[name];
    if (!v) throw new BatonError(`baton: ${name} is not set: BatonSaver.fromEnv() runs inside a baton exec node`);
    return v;
  };
  const t = parseToken(need("BATON_FENCING_TOKEN"));
  const lease = {
    thread: validateID("BATON_THREAD_ID", need("BATON_THREAD_ID")),
    run: t.run,
    incarnation: t.incarnation,
    node: t.node,
    epoch: t.epoch,
    claim: t.claim,
    worker: need("BATON_WORKER_ID"),
  };
  for (const [name, want] of [["BATON_RUN_ID", lease.run], ["BATON_NODE_ID", lease.node], ["BATON_EPOCH", String(lease.epoch)]]) {
    if (env[name] !== undefined && env[name] !== want) {
      throw new BatonError(`baton: ${name}=${env[name]} disagrees with BATON_FENCING_TOKEN (${want})`);
    }
  }
  return lease;
}

/** Checks a lease handed to BatonSaver and returns a frozen copy. */
export function checkLease(l) {
  if (l === null || typeof l !== "object") throw new BatonError("baton: lease: want an object");
  const epoch = Number(l.epoch);
  if (!Number.isSafeInteger(epoch) || epoch < 1) throw new BatonError(`baton: lease epoch ${l.epoch}: want a positive integer`);
  if (typeof l.worker !== "string" || l.worker === "") throw new BatonError("baton: lease worker: empty");
  return Object.freeze({
    thread: validateID("lease thread", l.thread),
    run: validateID("lease run", l.run),
    incarnation: l.incarnation ?? "",
    node: validateID("lease node", l.node),
    epoch,
    claim: validateID("lease claim id", l.claim),
    worker: l.worker,
  });
}
