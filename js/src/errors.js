// Errors BatonSaver throws. A refusal by the store is final: retrying the
// same write with the same lease gets the same answer.

/** The codes baton's scripts answer with, and what they mean here. */
export const CODES = Object.freeze({
  "-1": "node missing: the run expired or never existed",
  "-10": "stale epoch: the node was claimed again since this lease",
  "-11": "not owner: the same epoch was handed to another claim",
  "-12": "node not running: this claim's node was released or has finished",
  "-14": "the run is not its thread's active run",
  "-15": "too large",
  "-16": "no checkpoint with that id in the namespace",
  "-21": "the thread's active run has not finished",
  "-23": "the thread's active run or namespaces changed while deleting",
});

/** Codes that mean the lease is no longer the node's current claim. */
const FENCED = new Set([-10, -11, -12, -14]);

/** Any answer of baton's store that refused an operation. */
export class BatonError extends Error {
  /**
   * @param {string} message
   * @param {{code?: number, op?: string, cause?: unknown}} [details]
   */
  constructor(message, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "BatonError";
    /** The script's code, e.g. -10; undefined for checks made before a call. */
    this.code = details.code;
    /** The operation: checkpoint, checkpoint_writes or checkpoint_delete. */
    this.op = details.op;
  }
}

/**
 * The store refused a write because the lease it carries is not the node's
 * current claim: another worker took the node over (or the run is no longer
 * the thread's active run). Nothing was written, and the refusal is in the
 * run's events as stale_rejected. The graph must stop: LangGraph rethrows
 * it from invoke/stream, and the saver's `signal` is aborted with it.
 */
export class BatonFencedError extends BatonError {
  constructor(message, details = {}) {
    super(message, details);
    this.name = "BatonFencedError";
  }
}

/**
 * The saver learnt, without writing, that its lease is no longer the node's
 * current claim: the node was claimed again (another worker took it over),
 * it is no longer RUNNING, its run was cancelled, or its lease ran out on
 * Redis's clock because the runner stopped renewing it (paused, partitioned,
 * dead). `reason` says which. It is a BatonFencedError: the attempt must
 * stop, and every later call of the saver throws it again.
 */
export class BatonLeaseLostError extends BatonFencedError {
  constructor(message, details = {}) {
    super(message, details);
    this.name = "BatonLeaseLostError";
    /** "claimed_again", "not_running", "cancelled", "lease_expired", "node_missing", "unconfirmed" or "refused" (a write was refused). */
    this.reason = details.reason;
  }
}

/**
 * The exit code of an exec node's process that stopped because it lost its
 * lease (EX_TEMPFAIL of sysexits.h). The exec kind records such an exit as a
 * lost attempt, as it does a lease its runner lost: not a failure of the
 * node, and never committed. Every baton integration uses this same code.
 */
export const EXIT_LEASE_LOST = 75;

/** Makes the error for a script's negative code. */
export function codeError(op, code, lease) {
  const what = CODES[String(code)] ?? `unknown code ${code}`;
  const who = lease ? ` (lease ${lease.run}/${lease.node}@${lease.epoch} on thread ${lease.thread})` : "";
  const message = `baton: ${op} refused: ${what}${who}`;
  return FENCED.has(code) ? new BatonFencedError(message, { code, op }) : new BatonError(message, { code, op });
}

/** Reports whether err means the saver's lease is no longer current. */
export function isFenced(err) {
  return err instanceof BatonFencedError;
}
