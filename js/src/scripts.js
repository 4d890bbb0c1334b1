// The Lua scripts BatonSaver runs: the very text of scripts/lua as Redis
// runs it for baton itself, copied into ../lua by `go run
// ./js/gen` (a Go test keeps the copies identical).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

/** One script, called with EVALSHA and loaded with EVAL on NOSCRIPT. */
export class Script {
  constructor(name) {
    this.name = name;
    this.source = readFileSync(new URL(`../lua/${name}.lua`, import.meta.url), "utf8");
    this.sha = createHash("sha1").update(this.source).digest("hex");
  }

  /**
   * @param {import("ioredis").Redis} redis
   * @param {string[]} keys
   * @param {(string|number)[]} args
   */
  async run(redis, keys, args) {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!String(err?.message).startsWith("NOSCRIPT")) throw err;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}

export const scripts = Object.freeze({
  checkpoint: new Script("checkpoint"),
  checkpointWrites: new Script("checkpoint_writes"),
  checkpointDelete: new Script("checkpoint_delete"),
});
