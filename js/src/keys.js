// Redis keys, exactly as fence/keys.go builds them. The key space is cut
// into SHARDS shards; a thread belongs to one (FNV-1a of its id), and
// every key of the thread carries its shard's hash tag, so each script
// touches one Redis Cluster slot.

/** The number of shards: part of the key layout, as in fence.Shards. */
export const SHARDS = 16;

/** CRC16-XMODEM, Redis Cluster's key hash. */
function crc16(s) {
  let crc = 0;
  for (const b of Buffer.from(s)) {
    crc ^= b << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** Shard i's hash tag: the first "s<i>.<n>" whose slot lies in the i-th sixteenth. */
const SHARD_TAGS = Array.from({ length: SHARDS }, (_, i) => {
  const width = 16384 / SHARDS;
  for (let n = 0; ; n++) {
    const tag = `s${i}.${n}`;
    if (Math.floor((crc16(tag) & 16383) / width) === i) return tag;
  }
});

/** The shard of a thread's keys (FNV-1a, 32 bits, of its id). */
export function shardOf(thread) {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(thread)) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h % SHARDS;
}

export class Keys {
  constructor(prefix = "baton") {
    this.prefix = prefix || "baton";
  }
  tagged(thread, ...parts) {
    return `${this.prefix}:{${SHARD_TAGS[shardOf(thread)]}}:${thread}:${parts.join(":")}`;
  }
  run(thread, run) {
    return this.tagged(thread, "run", run);
  }
  node(thread, run, node) {
    return this.tagged(thread, "node", run, node);
  }
  active(thread) {
    return this.tagged(thread, "active");
  }
  events(thread, run) {
    return this.tagged(thread, "events", run);
  }
  /** The thread's hash of namespaces, each with its last version. */
  checkpoints(thread) {
    return this.tagged(thread, "cp");
  }
  /** versions zset, data hash, ids hash, pending writes hash of one namespace. */
  checkpointNS(thread, ns) {
    return ["cpv", "cpd", "cpi", "cpw"].map((k) => this.tagged(thread, k, ns));
  }
  /** A SCAN pattern for every thread's namespace hash, and its parser. */
  threadPattern() {
    return `${this.prefix.replace(/[*?[\]\\]/g, "\\$&")}:{*}:*:cp`;
  }
  threadOf(key) {
    const head = `${this.prefix}:{`;
    const tail = ":cp";
    if (!key.startsWith(head) || !key.endsWith(tail)) return undefined;
    const rest = key.slice(head.length, key.length - tail.length);
    const close = rest.indexOf("}:");
    if (close < 0) return undefined;
    const thread = rest.slice(close + 2);
    // A thread id holds no colon; the tag must be the thread's own.
    if (thread === "" || thread.includes(":") || rest.slice(0, close) !== SHARD_TAGS[shardOf(thread)]) return undefined;
    return thread;
  }
}
