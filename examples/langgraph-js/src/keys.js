// Redis keys, exactly as fence/keys.go builds them: every key of a thread
// shares the hash tag {thread}.
export class Keys {
  constructor(prefix = "baton") {
    this.prefix = prefix || "baton";
  }
  tagged(thread, ...parts) {
    return `${this.prefix}:{${thread}}:${parts.join(":")}`;
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
    return `${this.prefix.replace(/[*?[\]\\]/g, "\\$&")}:{*}:cp`;
  }
  threadOf(key) {
    const head = `${this.prefix}:{`;
    const tail = "}:cp";
    if (!key.startsWith(head) || !key.endsWith(tail)) return undefined;
    return key.slice(head.length, key.length - tail.length);
  }
}
