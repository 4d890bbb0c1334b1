// The claim watch: how an exec node's process learns, without writing,
// that its lease is gone. Its runner may be paused (SIGSTOP, a long GC, a
// frozen VM) while the process it started goes on running: nothing the
// runner does can reach it then. So the process reads the node itself, on
// Redis's clock, about once per heartbeat interval.
//
// One read is one round trip, a MULTI of:
//
//	HMGET <node> state epoch claim lease_until heartbeat_at started_at
//	HGET  <run>  cancel
//	TIME
//
// The claim is gone when the node is missing, is not RUNNING, has another
// epoch or claim id than the lease, when its run was cancelled, or when
// lease_until (ms, Redis time) is past Redis's TIME: the runner stopped
// renewing, and a takeover may come at any moment. The runner's own
// self-fencing gives up its lease before lease_until (see
// runner/heartbeat.go), so a child stopping at lease_until never stops
// while its runner still trusts the lease. docs/langgraph-js.md describes
// the same check for programs in any language.
import { BatonLeaseLostError } from "./errors.js";

/** Bounds on the time between two reads. */
const MIN_INTERVAL_MS = 50;
const MAX_INTERVAL_MS = 10_000;
/** Read again this long after the lease's deadline, when no renewal came first. */
const AFTER_DEADLINE_MS = 20;

/**
 * What one read of the node says about the lease: undefined while the
 * lease is the node's current, live claim, or the BatonLeaseLostError
 * that says why it is not. Also returns the deadline and the lease's TTL
 * as seen (ms).
 * @param {import("./lease.js").Lease} lease
 * @param {(string|null)[]} node HMGET state epoch claim lease_until heartbeat_at started_at
 * @param {string|null} cancel the run's cancel flag
 * @param {[string, string]} time Redis TIME
 */
export function judge(lease, node, cancel, time) {
  const [state, epoch, claim, leaseUntil, heartbeatAt, startedAt] = node;
  const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  const who = `${lease.run}/${lease.node}@${lease.epoch}`;
  const lost = (reason, what) =>
    ({ now, lost: new BatonLeaseLostError(`baton: lease ${who} lost: ${what}`, { reason, op: "watch" }) });
  if (state == null) return lost("node_missing", "the node is gone (the run expired or was deleted)");
  if (epoch !== String(lease.epoch) || claim !== lease.claim) {
    return lost("claimed_again", `the node was claimed again (epoch ${epoch}): another worker took it over`);
  }
  if (state !== "RUNNING") return lost("not_running", `the node is ${state}, no longer RUNNING under this claim`);
  if (cancel === "1") return lost("cancelled", "the run was cancelled");
  const until = Number(leaseUntil);
  if (!(until > now)) {
    return lost("lease_expired", `its lease ran out ${now - until} ms ago on Redis's clock: the runner stopped renewing it`);
  }
  const since = Math.max(Number(heartbeatAt) || 0, Number(startedAt) || 0);
  const ttl = since > 0 && since < until ? until - since : undefined;
  return { now, until, ttl };
}

/**
 * Reads the node of a lease every intervalMs (by default a third of the
 * lease's TTL, the runner's longest heartbeat interval), and once more just
 * after the lease's deadline if no renewal moved it. Calls onLost once,
 * with the BatonLeaseLostError, when the claim is gone. Its timer never
 * keeps the process alive. A read that fails (Redis unreachable) is tried
 * again; meanwhile the watch trusts the deadline it last read, carried
 * over to the local monotonic clock from when that read started, and no
 * longer: past it the claim counts as lost ("unconfirmed"), since it may
 * have been taken over meanwhile.
 */
export class ClaimWatch {
  #redis;
  #nodeKey;
  #runKey;
  #lease;
  #intervalMs;
  #onLost;
  #timer;
  #stopped = false;
  #trustUntil; // performance.now() past which the last deadline read has passed
  #ttl; // the lease's TTL as last seen, ms

  /**
   * @param {object} o
   * @param {import("ioredis").Redis} o.redis
   * @param {string} o.nodeKey
   * @param {string} o.runKey
   * @param {import("./lease.js").Lease} o.lease
   * @param {number} [o.intervalMs] fixed time between reads
   * @param {(err: BatonLeaseLostError) => void} o.onLost
   */
  constructor(o) {
    this.#redis = o.redis;
    this.#nodeKey = o.nodeKey;
    this.#runKey = o.runKey;
    this.#lease = o.lease;
    this.#intervalMs = o.intervalMs;
    this.#onLost = o.onLost;
  }

  start() {
    this.#schedule(0);
    return this;
  }

  stop() {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** One read; resolves to what judge() says, or rejects with Redis's error. */
  async check() {
    const res = await this.#redis
      .multi()
      .hmget(this.#nodeKey, "state", "epoch", "claim", "lease_until", "heartbeat_at", "started_at")
      .hget(this.#runKey, "cancel")
      .time()
      .exec();
    for (const [err] of res) if (err) throw err;
    return judge(this.#lease, res[0][1], res[1][1], res[2][1]);
  }

  /** check(), or a rejection once ms passed without an answer (a client waiting to reconnect). */
  #checkWithin(ms) {
    let timer;
    const late = new Promise((_, fail) => {
      timer = setTimeout(() => fail(new Error(`no answer from Redis within ${Math.round(ms)} ms`)), ms);
      timer.unref();
    });
    return Promise.race([this.check(), late]).finally(() => clearTimeout(timer));
  }

  #lose(err) {
    this.stop();
    this.#onLost(err);
  }

  #schedule(ms) {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => this.#tick(), ms);
    this.#timer.unref();
  }

  async #tick() {
    let next = this.#intervalMs ?? 1000;
    const started = performance.now();
    try {
      const v = await this.#checkWithin(Math.max(this.#ttl ?? 3 * next, MIN_INTERVAL_MS));
      if (this.#stopped) return;
      if (v.lost) {
        this.#lose(v.lost);
        return;
      }
      this.#trustUntil = started + (v.until - v.now);
      if (v.ttl !== undefined) this.#ttl = v.ttl;
      if (this.#intervalMs === undefined && this.#ttl !== undefined) next = this.#ttl / 3;
      // Look again right after the deadline unless a renewal moves it first.
      next = Math.min(next, v.until - v.now + AFTER_DEADLINE_MS);
    } catch (err) {
      if (this.#stopped) return;
      if (this.#trustUntil !== undefined && performance.now() >= this.#trustUntil) {
        const l = this.#lease;
        this.#lose(
          new BatonLeaseLostError(
            `baton: lease ${l.run}/${l.node}@${l.epoch} lost: its deadline passed while Redis could not be read: ${err?.message ?? err}`,
            { reason: "unconfirmed", op: "watch", cause: err },
          ),
        );
        return;
      }
      // Look again by the deadline, whatever the pace.
      if (this.#trustUntil !== undefined) next = Math.min(next, this.#trustUntil - performance.now() + AFTER_DEADLINE_MS);
    }
    this.#schedule(Math.max(MIN_INTERVAL_MS, Math.min(MAX_INTERVAL_MS, next)));
  }
}
