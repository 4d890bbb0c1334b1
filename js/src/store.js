// BatonStore: LangGraph.js's BaseStore (a graph's long-term memory,
// `config.store` in a node) on Redis, in the keys and scripts of baton's
// item store, so that JS and Python graphs and the Agent Server API's
// /store routes (agentapi/store.go) share one store.
//
// Layout (fence/store_items.go): a namespace is one hash of items and one
// zset of expiries, hash-tagged together (one Redis Cluster slot), written
// by one script (store_put.lua); an index of namespaces serves search and
// listNamespaces. A put indexes first, then writes, so a namespace with
// items is always indexed; a reader skips an index entry whose items are
// gone. There is no vector index: `index` is refused, and a search's
// `query` is ignored as a store without an index ignores it.
import { BaseStore, InvalidNamespaceError } from "@langchain/langgraph-checkpoint";
import { Redis } from "ioredis";

import { BatonError } from "./errors.js";
import { Script } from "./scripts.js";

/** Limits, as fence's (fence/store_items.go). */
export const STORE_LIMITS = Object.freeze({
  depth: 32, label: 256, namespace: 1024, key: 1024, value: 1 << 20,
  /** An empty namespace's index entry is dropped only this long after its last put's index step, ms. */
  unindexGrace: 3600 * 1000,
});

const OPERATORS = new Set(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]);

const scripts = {
  put: new Script("store_put"),
  get: new Script("store_get"),
  index: new Script("store_index"),
  unindex: new Script("store_unindex"),
};

const bytes = (s) => Buffer.byteLength(s, "utf8");

function checkNamespace(ns, { put }) {
  if (!Array.isArray(ns)) throw new InvalidNamespaceError(`A namespace is an array of labels, got ${typeof ns}.`);
  if (put && ns.length === 0) throw new InvalidNamespaceError("Namespace cannot be empty.");
  if (ns.length > STORE_LIMITS.depth) throw new InvalidNamespaceError(`Namespace has ${ns.length} labels, at most ${STORE_LIMITS.depth}.`);
  for (const label of ns) {
    if (typeof label !== "string") throw new InvalidNamespaceError(`Namespace labels must be strings, got ${typeof label}.`);
    if (label === "") throw new InvalidNamespaceError(`Namespace labels cannot be empty strings. Got ${JSON.stringify(ns)}.`);
    if (label.includes(".")) throw new InvalidNamespaceError(`Invalid namespace label '${label}': labels cannot contain periods ('.').`);
    if (label.includes("\0")) throw new InvalidNamespaceError("Namespace labels cannot contain NUL bytes.");
    if (bytes(label) > STORE_LIMITS.label) throw new InvalidNamespaceError(`A namespace label of ${bytes(label)} bytes, at most ${STORE_LIMITS.label}.`);
  }
  if (bytes(ns.join(".")) > STORE_LIMITS.namespace) throw new InvalidNamespaceError(`Namespace is over ${STORE_LIMITS.namespace} bytes joined.`);
  if (put && ns[0] === "langgraph") throw new InvalidNamespaceError(`Root label for namespace cannot be "langgraph". Got: ${ns}`);
}

function checkFilter(f) {
  if (Array.isArray(f)) return f.forEach(checkFilter);
  if (f && typeof f === "object") {
    for (const [k, v] of Object.entries(f)) {
      if (k.startsWith("$") && !OPERATORS.has(k)) throw new BatonError(`baton: unsupported filter operator ${k} (${[...OPERATORS].join(", ")})`);
      checkFilter(v);
    }
  }
}

function equal(a, b) {
  return JSON.stringify(a) === JSON.stringify(b) || (isObj(a) && isObj(b) && matches(a, b) && matches(b, a));
}

const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** A value against a filter value, as the Python and Go stores compare (plus LangGraph.js's $in, $nin). */
function matches(got, want) {
  if (isObj(want)) {
    const ops = Object.keys(want).filter((k) => k.startsWith("$"));
    if (ops.length > 0) return ops.every((op) => apply(got, op, want[op]));
    return isObj(got) && Object.entries(want).every(([k, v]) => matches(got[k], v));
  }
  if (Array.isArray(want)) return Array.isArray(got) && got.length === want.length && want.every((w, i) => matches(got[i], w));
  return got === want;
}

function apply(got, op, arg) {
  switch (op) {
    case "$eq": return equal(got, arg);
    case "$ne": return !equal(got, arg);
    case "$in": return Array.isArray(arg) && arg.some((a) => equal(got, a));
    case "$nin": return !Array.isArray(arg) || !arg.some((a) => equal(got, a));
  }
  const g = Number(got);
  const a = Number(arg);
  if (got === null || got === undefined || Number.isNaN(g) || Number.isNaN(a)) return false;
  return { $gt: g > a, $gte: g >= a, $lt: g < a, $lte: g <= a }[op];
}

/** An item as store_put.lua stores it ("created updated ttl expires json"), or null when expired. */
function parse(namespace, key, raw, now) {
  const parts = [];
  let rest = raw;
  for (let i = 0; i < 4; i += 1) {
    const sp = rest.indexOf(" ");
    parts.push(Number(rest.slice(0, sp)));
    rest = rest.slice(sp + 1);
  }
  const [c, u, ttl, exp] = parts;
  if (exp && exp <= now) return null;
  return { namespace, key, value: JSON.parse(rest), createdAt: new Date(c), updatedAt: new Date(u), ttl };
}

const labelsCompare = (a, b) => {
  const x = a.split(".");
  const y = b.split(".");
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) {
    if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
  }
  return x.length - y.length;
};

/**
 * LangGraph.js's BaseStore on baton's Redis.
 *
 * `redis` is a URL or an ioredis client; `prefix` the runner's key prefix
 * (default "baton"). `ttl` takes `{ defaultTtl }` (minutes) and
 * `{ refreshOnRead }` (default true); expired items are never returned, and
 * their space is reclaimed by the next script that touches their
 * namespace. Every write is safe to retry. A batch's puts (the last of each
 * namespace and key) are written first, one script per namespace, then its
 * reads are answered.
 */
export class BatonStore extends BaseStore {
  constructor({ redis, prefix = "baton", ttl, index } = {}) {
    super();
    if (index !== undefined && index !== null) {
      throw new BatonError("baton: BatonStore has no vector index, so semantic search (index) is not supported; remove the store's index configuration");
    }
    if (!redis) throw new BatonError("baton: BatonStore needs redis (a URL or an ioredis client)");
    this.redis = typeof redis === "string" ? new Redis(redis) : redis;
    this.ownsRedis = typeof redis === "string";
    this.prefix = prefix || "baton";
    this.ttl = ttl ?? {};
  }

  items(ns) { return `${this.prefix}:store:{n:${ns}}:items`; }
  expiries(ns) { return `${this.prefix}:store:{n:${ns}}:ttl`; }
  indexKeys() { return [`${this.prefix}:store:{index}:ns`, `${this.prefix}:store:{index}:seen`]; }

  async batch(operations) {
    const puts = new Map();
    for (const op of operations) {
      if ("value" in op) {
        checkNamespace(op.namespace, { put: op.value !== null && op.value !== undefined });
        if (bytes(String(op.key)) > STORE_LIMITS.key) throw new BatonError(`baton: an item key over ${STORE_LIMITS.key} bytes`);
        puts.set(JSON.stringify([op.namespace, String(op.key)]), op);
      } else if ("namespacePrefix" in op) {
        checkNamespace(op.namespacePrefix, { put: false });
        checkFilter(op.filter);
      } else if ("matchConditions" in op || !("key" in op)) {
        for (const c of op.matchConditions ?? []) checkNamespace(c.path.map((p) => (p === "*" ? "x" : p)), { put: false });
      } else {
        checkNamespace(op.namespace, { put: false });
      }
    }
    if (puts.size > 0) await this.putAll([...puts.values()]);
    const results = [];
    for (const op of operations) {
      if ("value" in op) results.push(null);
      else if ("namespacePrefix" in op) results.push(await this.searchOp(op));
      else if ("key" in op) results.push((await this.getItems(op.namespace, [String(op.key)], this.ttl.refreshOnRead ?? true))[0]);
      else results.push(await this.listOp(op));
    }
    return results;
  }

  async put(namespace, key, value, index, options) {
    // LangGraph.js's put takes no ttl; baton's takes { ttl } (minutes) after index.
    // Without a vector index, the fields to index are ignored, as
    // LangGraph's stores without one ignore them.
    checkNamespace(namespace, { put: true });
    await this.batch([{ namespace, key, value, index, ttl: options?.ttl ?? this.ttl.defaultTtl }]);
  }

  async putAll(puts) {
    const groups = new Map();
    const index = [];
    for (const op of puts) {
      const ns = op.namespace.join(".");
      let value = "";
      let ttlMs = 0;
      if (op.value !== null && op.value !== undefined) {
        if (!isObj(op.value)) throw new BatonError("baton: an item's value must be an object");
        value = JSON.stringify(op.value);
        if (bytes(value) > STORE_LIMITS.value) throw new BatonError(`baton: an item value of ${bytes(value)} bytes, at most ${STORE_LIMITS.value}`);
        if (!index.includes(ns)) index.push(ns);
        if (op.ttl) ttlMs = Math.max(Math.round(op.ttl * 60000), 1);
      }
      if (!groups.has(ns)) groups.set(ns, []);
      groups.get(ns).push(String(op.key), value, String(ttlMs));
    }
    if (index.length > 0) await scripts.index.run(this.redis, this.indexKeys(), index);
    for (const [ns, args] of groups) await scripts.put.run(this.redis, [this.items(ns), this.expiries(ns)], args);
  }

  async getItems(namespace, keys, refresh) {
    const ns = namespace.join(".");
    const r = await scripts.get.run(this.redis, [this.items(ns), this.expiries(ns)], [refresh ? "1" : "0", ...keys]);
    const now = Number(r[0]);
    return keys.map((k, i) => {
      const raw = r[i + 2];
      if (raw === null || raw === undefined) return null;
      const it = parse(namespace, k, raw, now);
      if (it) delete it.ttl;
      return it;
    });
  }

  async indexed(prefix) {
    const [index] = this.indexKeys();
    let names;
    if (prefix.length === 0) names = await this.redis.zrange(index, 0, -1);
    else {
      const p = prefix.join(".");
      names = await this.redis.zrangebylex(index, `[${p}.`, `(${p}/`);
      if ((await this.redis.zscore(index, p)) !== null) names.push(p);
    }
    return names.sort(labelsCompare);
  }

  async now() {
    const [s, us] = await this.redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  async unindex(empty) {
    if (empty.length > 0) await scripts.unindex.run(this.redis, this.indexKeys(), [String(STORE_LIMITS.unindexGrace), ...empty]);
  }

  async searchOp(op) {
    const limit = op.limit ?? 10;
    const names = await this.indexed(op.namespacePrefix);
    const now = await this.now();
    const out = [];
    const refresh = new Map();
    const empty = [];
    let skip = Math.max(op.offset ?? 0, 0);
    for (const ns of names) {
      if (out.length >= limit) break;
      const items = await this.redis.hgetall(this.items(ns));
      const keys = Object.keys(items).sort();
      if (keys.length === 0) {
        empty.push(ns);
        continue;
      }
      for (const key of keys) {
        const it = parse(ns.split("."), key, items[key], now);
        if (!it || !Object.entries(op.filter ?? {}).every(([k, v]) => matches(it.value[k], v))) continue;
        if (skip > 0) {
          skip -= 1;
          continue;
        }
        if (it.ttl > 0 && (this.ttl.refreshOnRead ?? true)) {
          if (!refresh.has(ns)) refresh.set(ns, []);
          refresh.get(ns).push(key);
        }
        delete it.ttl;
        out.push(it);
        if (out.length >= limit) break;
      }
    }
    for (const [ns, keys] of refresh) await this.getItems(ns.split("."), keys, true);
    await this.unindex(empty);
    return out;
  }

  async listOp(op) {
    const conds = op.matchConditions ?? [];
    let literal = [];
    for (const c of conds) {
      if (c.matchType === "prefix") {
        const i = c.path.indexOf("*");
        literal = i >= 0 ? c.path.slice(0, i) : c.path;
      }
    }
    const names = (await this.indexed(literal)).filter((ns) => conds.every((c) => matchCondition(c, ns.split("."))));
    const now = await this.now();
    const live = [];
    const empty = [];
    for (const ns of names) {
      const n = await this.redis.hlen(this.items(ns));
      const gone = await this.redis.zcount(this.expiries(ns), "-inf", now);
      if (n - gone > 0) live.push(ns.split("."));
      else if (n === 0) empty.push(ns);
    }
    await this.unindex(empty);
    let out = live;
    if (op.maxDepth !== undefined && op.maxDepth !== null) {
      const seen = new Set();
      out = [];
      for (const ns of live) {
        const cut = ns.slice(0, op.maxDepth);
        if (!seen.has(cut.join("."))) {
          seen.add(cut.join("."));
          out.push(cut);
        }
      }
      out.sort((a, b) => labelsCompare(a.join("."), b.join(".")));
    }
    const offset = op.offset ?? 0;
    return out.slice(offset, offset + (op.limit ?? 100));
  }

  /** Closes the client the store made from a URL (not one it was given). */
  async close() {
    if (this.ownsRedis) await this.redis.quit();
  }
}

function matchCondition(c, ns) {
  if (c.path.length > ns.length) return false;
  const part = c.matchType === "prefix" ? ns.slice(0, c.path.length) : ns.slice(ns.length - c.path.length);
  return c.path.every((p, i) => p === "*" || p === part[i]);
}
