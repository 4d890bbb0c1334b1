// BatonSaver: a LangGraph checkpointer whose every write is fenced by a
// baton lease, in baton's own checkpoint store.
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  compareWritesSortKeys,
  copyCheckpoint,
  getCheckpointId,
  maxChannelVersion,
  writesSortKey,
} from "@langchain/langgraph-checkpoint";
import { Redis } from "ioredis";

import { DetachedSaver } from "./detached.js";
import { BatonError, BatonLeaseLostError, EXIT_LEASE_LOST, codeError, isFenced } from "./errors.js";
import { validateID, validateNS } from "./ids.js";
import { Keys } from "./keys.js";
import { checkLease, leaseFromEnv } from "./lease.js";
import { scripts } from "./scripts.js";
import { refOnlyWhileBusy } from "./socket.js";
import { ClaimWatch } from "./watch.js";

/** Defaults, the same as fence.Options' and the runner's. */
export const DEFAULTS = Object.freeze({
  prefix: "baton",
  /** Checkpoints kept per thread and namespace, the newest. */
  history: 100,
  /** How long a thread's checkpoints live after their last write, ms (30 days); 0 keeps them. */
  retentionMs: 30 * 24 * 3600 * 1000,
  /** Cap on a checkpoint's data plus metadata, and on one putWrites, bytes. */
  maxBytes: 1 << 20,
  /** Approximate MAXLEN of a run's event stream. */
  eventMaxLen: 10000,
});

// A stored value is a JSON envelope around what the serializer made:
// {"serde":"json","value":<JSON>} keeps JSON readable by baton's own tools
// (enqueue checkpoints), {"serde":"<type>","base64":"..."} holds the rest.
const JSON_HEAD = '{"serde":"json","value":';

function envelope(type, bytes) {
  if (type === "json") {
    return JSON_HEAD + (typeof bytes === "string" ? bytes : Buffer.from(bytes).toString("utf8")) + "}";
  }
  return JSON.stringify({ serde: type, base64: Buffer.from(bytes).toString("base64") });
}

/** Splits an envelope into [type, data]; undefined when text is not one (another tool's checkpoint). */
function unwrap(text) {
  if (typeof text !== "string") return undefined;
  if (text.startsWith(JSON_HEAD) && text.endsWith("}")) {
    return ["json", text.slice(JSON_HEAD.length, -1)];
  }
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (v === null || typeof v !== "object" || typeof v.serde !== "string") return undefined;
  if (v.serde === "json") return ["json", JSON.stringify(v.value)];
  if (typeof v.base64 !== "string") return undefined;
  return [v.serde, new Uint8Array(Buffer.from(v.base64, "base64"))];
}

/**
 * The checkpoint metadata key under which a saver of one lease records the
 * run that wrote the checkpoint (the store records it too, beside the
 * checkpoint). runNode decides between resuming and starting by it.
 */
export const RUN_METADATA_KEY = "baton_run";

/**
 * The checkpoint metadata key, and the `configurable` key runNode sets it
 * by, that records the wait whose answer the graph was resumed with
 * (runNode gives one answer to one interrupt by it).
 */
export const RESUME_METADATA_KEY = "baton_resume";

/** The metadata a saver of one lease stores: LangGraph's, with the run, and the wait answered. */
function leaseMetadata(metadata, config, lease) {
  const wait = config?.configurable?.[RESUME_METADATA_KEY];
  return { ...metadata, [RUN_METADATA_KEY]: lease.run, ...(typeof wait === "string" ? { [RESUME_METADATA_KEY]: wait } : {}) };
}

function sameClaim(a, b) {
  return a.thread === b.thread && a.run === b.run && a.node === b.node && a.epoch === b.epoch && a.claim === b.claim;
}

/**
 * A LangGraph `BaseCheckpointSaver` backed by baton's fenced checkpoint
 * store. Writes (put, putWrites, deleteThread) run baton's own scripts
 * (checkpoint.lua, checkpoint_writes.lua, checkpoint_delete.lua), which
 * accept them only from the current claim of a RUNNING node of the
 * thread's active run. A refused write throws BatonFencedError and aborts
 * `signal`. Reads are plain reads of the keys the Go store reads.
 *
 * Mapping: LangGraph's thread_id is baton's thread (the run's thread,
 * BATON_THREAD_ID), checkpoint_ns is baton's namespace ("" is the root
 * graph), checkpoint_id is the checkpoint id; the store adds a version per
 * namespace and records the run, node, epoch and worker of every write.
 *
 * Losing the lease: when a write is refused, or the claim watch (option
 * `watch`, on for `fromEnv()`) reads that the claim is gone, the saver
 * aborts `signal` with a BatonFencedError, every later call throws that
 * error, and with `onLost: "exit"` (the default of `fromEnv()`) the process
 * exits at once with code 75, EXIT_LEASE_LOST, which the exec kind records
 * as a lost attempt.
 */
export class BatonSaver extends BaseCheckpointSaver {
  #redis;
  #ownsRedis;
  #unref = () => {};
  #keys;
  #leaseFor;
  #opts;
  #abort = new AbortController();
  #lost;
  #onLost;
  #watch;

  /**
   * @param {object} options
   * @param {import("ioredis").Redis | string} options.redis an ioredis client, or a Redis URL (the saver then owns the client; close() quits it)
   * @param {string} [options.prefix] baton's key prefix (the runner's BATON_PREFIX); default "baton"
   * @param {import("./lease.js").Lease} [options.lease] the lease every write carries; its thread is the only one this saver writes to
   * @param {(threadId: string) => Promise<import("./lease.js").Lease>} [options.leaseFor] instead of lease: the lease for a thread's writes, asked for at each write (a test harness or a process that owns several threads' claims)
   * @param {number} [options.history] checkpoints kept per namespace (100)
   * @param {number} [options.retentionMs] thread retention after its last write (30 days); 0 keeps checkpoints forever
   * @param {number} [options.maxBytes] cap per checkpoint and per putWrites (1 MiB)
   * @param {number} [options.eventMaxLen] event stream MAXLEN (10000)
   * @param {import("@langchain/langgraph-checkpoint").SerializerProtocol} [options.serde]
   * @param {boolean | {intervalMs?: number}} [options.watch] watch the lease's claim without writing (needs lease); default false, true for fromEnv()
   * @param {"exit" | "abort" | ((err: BatonFencedError) => void)} [options.onLost] what losing the lease does besides aborting `signal` and failing every later call: "exit" ends the process with code 75 (the default of fromEnv()), "abort" nothing more (the default), a function is called once
   */
  constructor(options) {
    super(options?.serde);
    const o = options ?? {};
    if (!o.redis) throw new BatonError("baton: BatonSaver needs redis: an ioredis client or a URL");
    if ((o.lease === undefined) === (o.leaseFor === undefined)) {
      throw new BatonError("baton: BatonSaver needs exactly one of lease and leaseFor: every write carries a lease");
    }
    this.#ownsRedis = typeof o.redis === "string";
    this.#redis = this.#ownsRedis ? new Redis(o.redis, { lazyConnect: false }) : o.redis;
    // A client the saver made never keeps a finished program alive.
    if (this.#ownsRedis) this.#unref = refOnlyWhileBusy(this.#redis);
    this.#keys = new Keys(o.prefix ?? DEFAULTS.prefix);
    if (o.lease !== undefined) {
      const lease = checkLease(o.lease);
      this.lease = lease;
      this.#leaseFor = async (thread) => {
        if (thread !== lease.thread) {
          throw new BatonError(
            `baton: thread_id ${JSON.stringify(thread)} is not this lease's thread ${JSON.stringify(lease.thread)}: ` +
              "a node writes only to its run's thread (BATON_THREAD_ID)",
          );
        }
        return lease;
      };
    } else {
      this.#leaseFor = async (thread) => checkLease(await o.leaseFor(thread));
    }
    this.#opts = {
      history: o.history ?? DEFAULTS.history,
      retentionMs: o.retentionMs ?? DEFAULTS.retentionMs,
      maxBytes: o.maxBytes ?? DEFAULTS.maxBytes,
      eventMaxLen: o.eventMaxLen ?? DEFAULTS.eventMaxLen,
    };
    const onLost = o.onLost ?? "abort";
    if (onLost !== "exit" && onLost !== "abort" && typeof onLost !== "function") {
      throw new BatonError(`baton: onLost: want "exit", "abort" or a function, got ${JSON.stringify(onLost)}`);
    }
    this.#onLost = onLost;
    if (o.watch) {
      if (!this.lease) throw new BatonError("baton: watch needs a lease (one claim to watch), not leaseFor");
      this.#watch = new ClaimWatch({
        redis: this.#redis,
        nodeKey: this.#nodeKey(),
        runKey: this.#runKey(),
        lease: this.lease,
        intervalMs: typeof o.watch === "object" ? o.watch.intervalMs : undefined,
        onLost: (err) => this.#lose(err),
      }).start();
    }
  }

  /**
   * The saver of the exec node this process runs as, from the environment
   * the runner gives its command: BATON_REDIS_URL, BATON_PREFIX,
   * BATON_FENCING_TOKEN, BATON_THREAD_ID and BATON_WORKER_ID.
   *
   * Outside an exec node (neither BATON_FENCING_TOKEN nor BATON_REDIS_URL
   * set) it returns a DetachedSaver, so a graph module that builds its
   * checkpointer at import imports anywhere; its first read or write
   * throws a BatonError saying why. Half an exec node's environment still
   * throws here, naming what is missing.
   * @param {object} [options] overrides, as for the constructor
   * @param {Record<string, string|undefined>} [env]
   */
  static fromEnv(options = {}, env = process.env) {
    // Not an exec node (an import by a test, a notebook, the graph
    // worker): the module imports; the first use says why not.
    if (!options.redis && !env.BATON_REDIS_URL && !env.BATON_FENCING_TOKEN) return new DetachedSaver();
    const url = options.redis ?? env.BATON_REDIS_URL;
    if (!url) throw new BatonError("baton: BATON_REDIS_URL is not set: BatonSaver.fromEnv() runs inside a baton exec node");
    const saver = new BatonSaver({
      prefix: env.BATON_PREFIX || DEFAULTS.prefix,
      lease: leaseFromEnv(env),
      watch: true,
      onLost: "exit",
      ...options,
      redis: url,
    });
    // The runner names the node's key (BATON_NODE_KEY): the layout this
    // package computes must be the same, or the watch would read nothing.
    if (env.BATON_NODE_KEY && options.prefix === undefined && env.BATON_NODE_KEY !== saver.#nodeKey()) {
      void saver.close();
      throw new BatonError(`baton: BATON_NODE_KEY ${env.BATON_NODE_KEY} is not the key this saver computes (${saver.#nodeKey()}): a key layout mismatch`);
    }
    return saver;
  }

  /**
   * Aborted with the BatonFencedError of the first refused write, or the
   * BatonLeaseLostError of the claim watch. Pass it to invoke/stream
   * ({signal: saver.signal}) so the graph stops at once, not only when
   * LangGraph next calls the saver.
   * @returns {AbortSignal}
   */
  get signal() {
    return this.#abort.signal;
  }

  /** The error the lease was lost with, or undefined while it holds. */
  get lost() {
    return this.#lost;
  }

  /**
   * Reads the node once and reports whether the lease is still its current,
   * live claim; loses the lease (as the watch does) when it is not.
   * @returns {Promise<boolean>}
   */
  async checkClaim() {
    this.#throwIfLost();
    if (!this.lease) throw new BatonError("baton: checkClaim needs a lease, not leaseFor");
    const w =
      this.#watch ??
      new ClaimWatch({
        redis: this.#redis,
        nodeKey: this.#nodeKey(),
        runKey: this.#runKey(),
        lease: this.lease,
        onLost: () => {},
      });
    const v = await w.check();
    if (v.lost) this.#lose(v.lost);
    return !v.lost;
  }

  /**
   * The id of the wait the node's latest resume answered (the node's
   * `resumed_wait`, set by a resume, cleared by the next park), or null
   * when it was not resumed since it last parked. runNode records it in
   * the checkpoints it writes with that resume's value, so that one answer
   * goes to one interrupt: the exec kind gives every attempt after a
   * resume the same BATON_RESUME_FILE until the node parks again.
   * @returns {Promise<string|null>}
   */
  async resumedWait() {
    this.#throwIfLost();
    if (!this.lease) throw new BatonError("baton: resumedWait needs a lease, not leaseFor");
    return (await this.#redis.hget(this.#nodeKey(), "resumed_wait")) || null;
  }

  #nodeKey() {
    return this.#keys.node(this.lease.thread, this.lease.run, this.lease.node);
  }

  #runKey() {
    return this.#keys.run(this.lease.thread, this.lease.run);
  }

  /** The lease is gone: abort, fail from now on, and exit or tell as onLost says. */
  #lose(err) {
    if (this.#lost) return;
    this.#lost = err;
    this.#watch?.stop();
    this.#abort.abort(err);
    if (this.#onLost === "exit") {
      process.stderr.write(`${err.message}; exiting with code ${EXIT_LEASE_LOST} (lease lost)\n`);
      process.exit(EXIT_LEASE_LOST);
    }
    if (typeof this.#onLost === "function") this.#onLost(err);
  }

  #throwIfLost() {
    if (this.#lost) throw this.#lost;
  }

  /** The ioredis client the saver uses. */
  get redis() {
    return this.#redis;
  }

  /** Stops the claim watch and quits the Redis client if the saver made it. */
  async close() {
    this.#watch?.stop();
    if (this.#ownsRedis && this.#redis.status !== "end") {
      this.#unref();
      await this.#redis.quit().catch(() => this.#redis.disconnect());
    }
  }

  /** Turns a script's reply into its result array, or throws its refusal. */
  #reply(op, lease, v) {
    if (typeof v === "number" || (Array.isArray(v) && v[0] < 0)) {
      const code = typeof v === "number" ? v : v[0];
      const err = codeError(op, code, lease);
      if (isFenced(err)) {
        // A saver of one lease has lost it; one serving many (leaseFor) only says so.
        if (this.lease !== undefined && sameClaim(lease, this.lease)) {
          this.#lose(new BatonLeaseLostError(`${err.message}; the lease is lost`, { reason: "refused", op, code, cause: err }));
        } else if (!this.#abort.signal.aborted) this.#abort.abort(err);
      }
      throw err;
    }
    return v;
  }

  async put(config, checkpoint, metadata, _newVersions) {
    this.#throwIfLost();
    const thread = config?.configurable?.thread_id;
    if (thread === undefined) {
      throw new BatonError('baton: put: config.configurable has no "thread_id" (the run\'s thread, BATON_THREAD_ID)');
    }
    validateID("thread_id", thread);
    const ns = validateNS(config.configurable.checkpoint_ns ?? "");
    const id = validateID("checkpoint id", checkpoint.id);
    const parent = config.configurable.checkpoint_id ?? "";
    if (parent !== "") validateID("parent checkpoint_id", parent);
    const lease = await this.#leaseFor(thread);
    const [[dt, db], [mt, mb]] = await Promise.all([
      this.serde.dumpsTyped(copyCheckpoint(checkpoint)),
      this.serde.dumpsTyped(this.lease === undefined ? (metadata ?? {}) : leaseMetadata(metadata, config, lease)),
    ]);
    const data = envelope(dt, db);
    const meta = envelope(mt, mb);
    const size = Buffer.byteLength(data) + Buffer.byteLength(meta);
    if (size > this.#opts.maxBytes) {
      throw new BatonError(`baton: checkpoint ${id}: ${size} bytes, at most ${this.#opts.maxBytes}`, { code: -15, op: "checkpoint" });
    }
    const v = await scripts.checkpoint.run(this.#redis, this.#nsKeys(lease, ns), [
      lease.node, lease.run, lease.thread, lease.worker, lease.epoch, lease.claim,
      ns, id, parent, data, meta,
      this.#opts.history, this.#opts.retentionMs, this.#opts.maxBytes, this.#opts.eventMaxLen,
    ]);
    this.#reply("checkpoint", lease, v);
    return { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: id } };
  }

  async putWrites(config, writes, taskId, taskPath) {
    this.#throwIfLost();
    const thread = config?.configurable?.thread_id;
    const id = config?.configurable?.checkpoint_id;
    if (thread === undefined) throw new BatonError('baton: putWrites: config.configurable has no "thread_id"');
    if (id === undefined) throw new BatonError('baton: putWrites: config.configurable has no "checkpoint_id"');
    validateID("thread_id", thread);
    validateID("checkpoint_id", id);
    const ns = validateNS(config.configurable.checkpoint_ns ?? "");
    if (typeof taskId !== "string" || taskId === "") throw new BatonError("baton: putWrites: task id is empty");
    const lease = await this.#leaseFor(thread);
    if (writes.length === 0) return;
    const pairs = await Promise.all(
      writes.map(async ([channel, value], i) => {
        const idx = WRITES_IDX_MAP[channel] ?? i;
        const [t, b] = await this.serde.dumpsTyped(value);
        // The record baton keeps (fence.PendingWrite, plus the task's path).
        const head = JSON.stringify({ task: taskId, idx, channel, path: taskPath ?? "" }).slice(0, -1);
        return [idx, `${head},"value":${envelope(t, b)}}`];
      }),
    );
    const arg = JSON.stringify(pairs);
    if (Buffer.byteLength(arg) > this.#opts.maxBytes) {
      throw new BatonError(`baton: writes of task ${taskId}: ${Buffer.byteLength(arg)} bytes, at most ${this.#opts.maxBytes}`, {
        code: -15,
        op: "checkpoint_writes",
      });
    }
    const v = await scripts.checkpointWrites.run(this.#redis, this.#nsKeys(lease, ns), [
      lease.node, lease.run, lease.thread, lease.worker, lease.epoch, lease.claim,
      ns, id, taskId, arg, this.#opts.retentionMs, this.#opts.maxBytes, this.#opts.eventMaxLen,
    ]);
    this.#reply("checkpoint_writes", lease, v);
  }

  /**
   * Deletes every checkpoint and pending write of the thread, in every
   * namespace, fenced like a write: only the thread's active run's current
   * claim may do it (checkpoint_delete.lua, mode lease). Versions are not
   * reused afterwards.
   */
  async deleteThread(threadId) {
    this.#throwIfLost();
    validateID("thread_id", threadId);
    const lease = await this.#leaseFor(threadId);
    const k = this.#keys;
    for (let attempt = 0; ; attempt++) {
      const [[e1, active], [e2, names]] = await this.#redis
        .multi()
        .get(k.active(threadId))
        .hkeys(k.checkpoints(threadId))
        .exec();
      if (e1 || e2) throw e1 || e2;
      const keys = [
        k.active(threadId),
        active ? k.run(threadId, active) : k.checkpoints(threadId),
        k.checkpoints(threadId),
        k.node(lease.thread, lease.run, lease.node),
        k.events(lease.thread, lease.run),
      ];
      for (const ns of names) keys.push(...k.checkpointNS(threadId, ns));
      const v = await scripts.checkpointDelete.run(this.#redis, keys, [
        "lease", lease.run, active ?? "",
        lease.thread, lease.node, lease.worker, lease.epoch, lease.claim, this.#opts.eventMaxLen,
        ...names,
      ]);
      if (v === -23 && attempt < 5) continue; // the thread changed between the read and the script
      this.#reply("checkpoint_delete", lease, v);
      return;
    }
  }

  async getTuple(config) {
    this.#throwIfLost();
    const thread = config?.configurable?.thread_id;
    if (thread === undefined) return undefined;
    validateID("thread_id", thread);
    const ns = validateNS(config.configurable.checkpoint_ns ?? "");
    const id = getCheckpointId(config);
    const [versions, , ids] = this.#keys.checkpointNS(thread, ns);
    let version;
    if (id) {
      validateID("checkpoint_id", id);
      version = await this.#redis.hget(ids, id);
    } else {
      [version] = await this.#redis.zrevrange(versions, 0, 0);
    }
    if (version == null) return undefined;
    const [tuple] = await this.#tuples(thread, ns, [version]);
    return tuple;
  }

  async *list(config, options = {}) {
    this.#throwIfLost();
    const { before, filter } = options;
    let limit = options.limit;
    const want = config?.configurable ?? {};
    const beforeID = before?.configurable?.checkpoint_id;
    if (want.thread_id !== undefined) validateID("thread_id", want.thread_id);
    if (want.checkpoint_ns !== undefined) validateNS(want.checkpoint_ns);
    const threads = want.thread_id !== undefined ? [want.thread_id] : await this.#threads();
    for (const thread of threads) {
      const names =
        want.checkpoint_ns !== undefined ? [want.checkpoint_ns] : (await this.#redis.hkeys(this.#keys.checkpoints(thread))).sort();
      for (const ns of names) {
        const [versionsKey, dataKey] = this.#keys.checkpointNS(thread, ns);
        const versions = await this.#redis.zrevrange(versionsKey, 0, -1);
        for (let i = 0; i < versions.length; i += 64) {
          const page = versions.slice(i, i + 64);
          // Ids and metadata first: most filters are decided by them.
          const vals = await this.#redis.hmget(dataKey, ...page.flatMap((v) => [`${v}:i`, `${v}:m`]));
          const keep = [];
          for (let j = 0; j < page.length; j++) {
            const info = vals[2 * j];
            if (info == null) continue; // trimmed meanwhile
            const rec = JSON.parse(info);
            if (want.checkpoint_id && rec.id !== want.checkpoint_id) continue;
            if (beforeID && !(rec.id < beforeID)) continue;
            if (filter && Object.keys(filter).length > 0) {
              const m = unwrap(vals[2 * j + 1]);
              if (m === undefined) continue;
              const metadata = await this.serde.loadsTyped(...m);
              if (!Object.entries(filter).every(([key, value]) => metadata?.[key] === value)) continue;
            }
            keep.push(page[j]);
          }
          for (const tuple of await this.#tuples(thread, ns, keep)) {
            if (limit !== undefined) {
              if (limit <= 0) return;
              limit -= 1;
            }
            yield tuple;
          }
        }
      }
    }
  }

  /** Every thread that has (or had) checkpoints under the prefix. */
  async #threads() {
    const out = new Set();
    let cursor = "0";
    do {
      const [next, keys] = await this.#redis.scan(cursor, "MATCH", this.#keys.threadPattern(), "COUNT", 1000);
      cursor = next;
      for (const key of keys) {
        const t = this.#keys.threadOf(key);
        if (t !== undefined) out.add(t);
      }
    } while (cursor !== "0");
    return [...out].sort();
  }

  /** The tuples of the given versions of one namespace, in order; a version trimmed meanwhile is skipped. */
  async #tuples(thread, ns, versions) {
    if (versions.length === 0) return [];
    const [, dataKey, , writesKey] = this.#keys.checkpointNS(thread, ns);
    const vals = await this.#redis.hmget(dataKey, ...versions.flatMap((v) => [`${v}:d`, `${v}:m`, `${v}:i`, `${v}:w`]));
    const out = [];
    for (let i = 0; i < versions.length; i++) {
      const [data, meta, info, fields] = vals.slice(4 * i, 4 * i + 4);
      if (info == null) continue;
      const d = unwrap(data);
      if (d === undefined) continue; // not a LangGraph checkpoint (e.g. an exec node's ::checkpoint line)
      const rec = JSON.parse(info);
      const m = unwrap(meta);
      const checkpoint = await this.serde.loadsTyped(...d);
      const tuple = {
        config: { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: rec.id } },
        checkpoint,
        metadata: m === undefined ? undefined : await this.serde.loadsTyped(...m),
        pendingWrites: await this.#pendingWrites(writesKey, fields),
      };
      if (rec.parent) {
        tuple.parentConfig = { configurable: { thread_id: thread, checkpoint_ns: ns, checkpoint_id: rec.parent } };
        if (checkpoint.v < 4) await this.#migratePendingSends(checkpoint, thread, ns, rec.parent);
      }
      out.push(tuple);
    }
    return out;
  }

  /** The pending writes listed in a checkpoint's "<v>:w", in writesSortKey order. */
  async #pendingWrites(writesKey, fields, channel) {
    let names;
    try {
      names = fields ? JSON.parse(fields) : [];
    } catch {
      names = [];
    }
    if (!Array.isArray(names) || names.length === 0) return []; // Redis's cjson stores an empty list as {}
    const recs = (await this.#redis.hmget(writesKey, ...names))
      .filter((r) => r != null)
      .map((r) => JSON.parse(r))
      .filter((r) => channel === undefined || r.channel === channel);
    recs.sort((a, b) => compareWritesSortKeys(writesSortKey(a.path ?? "", a.task, a.idx), writesSortKey(b.path ?? "", b.task, b.idx)));
    return Promise.all(
      recs.map(async (r) => {
        const v = typeof r.value === "object" && r.value !== null ? unwrap(JSON.stringify(r.value)) : undefined;
        return [r.task, r.channel, v === undefined ? r.value : await this.serde.loadsTyped(...v)];
      }),
    );
  }

  /** Checkpoints before format 4 kept pending sends as the parent's TASKS writes, as MemorySaver migrates them. */
  async #migratePendingSends(checkpoint, thread, ns, parentID) {
    const [, dataKey, idsKey, writesKey] = this.#keys.checkpointNS(thread, ns);
    const v = await this.#redis.hget(idsKey, parentID);
    const fields = v == null ? null : await this.#redis.hget(dataKey, `${v}:w`);
    const sends = (await this.#pendingWrites(writesKey, fields, TASKS)).map(([, , value]) => value);
    checkpoint.channel_values ??= {};
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions ??= {};
    checkpoint.channel_versions[TASKS] =
      Object.keys(checkpoint.channel_versions).length > 0
        ? maxChannelVersion(...Object.values(checkpoint.channel_versions))
        : this.getNextVersion(undefined);
  }

  #nsKeys(lease, ns) {
    const k = this.#keys;
    return [
      k.node(lease.thread, lease.run, lease.node),
      k.events(lease.thread, lease.run),
      k.active(lease.thread),
      k.checkpoints(lease.thread),
      ...k.checkpointNS(lease.thread, ns),
    ];
  }
}
