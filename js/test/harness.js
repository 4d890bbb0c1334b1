// Test harness: a real redis-server on a free port, and batonctl (built from
// this repository) to submit runs and claim their nodes through baton's Go
// code, so every lease a test writes with is a live claim.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { Redis } from "ioredis";

/** The package's directory and the repository root above it. */
export const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const repoRoot = resolve(packageDir, "..");

export async function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

/** Starts redis-server on a free port; stop() kills it. */
export async function startRedis() {
  const port = await freePort();
  const proc = spawn(process.env.REDIS_SERVER || "redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  let spawnErr;
  proc.on("error", (err) => (spawnErr = err));
  const url = `redis://127.0.0.1:${port}/0`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on("error", () => {});
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (err) {
      if (spawnErr) throw new Error(`the tests start their own redis-server, and it could not be run: ${spawnErr.message}`);
      if (proc.exitCode !== null || Date.now() > deadline) {
        proc.kill("SIGKILL");
        throw new Error(`redis-server did not start: ${err}`);
      }
      probe.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  probe.disconnect();
  return {
    url,
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGKILL");
      await exited;
    },
  };
}

/** Builds batonctl into a temporary directory; returns its path and a cleanup. */
export function buildBatonctl() {
  const dir = mkdtempSync(join(tmpdir(), "batonctl-"));
  const bin = join(dir, "batonctl");
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  const go = process.env.GO || "go";
  try {
    execFileSync(go, ["build", "-o", bin, "./js/internal/batonctl"], { cwd: repoRoot, stdio: "inherit" });
  } catch (err) {
    cleanup();
    if (err.code === "ENOENT") {
      throw new Error(`the tests build batonctl with Go from this repository (${repoRoot}), and ${go} is not on PATH`);
    }
    throw err;
  }
  return { bin, cleanup };
}

/** A running batonctl: one JSON request per line, answered in order. */
export class Batonctl {
  #proc;
  #waiting = [];

  constructor(bin, redisURL) {
    this.#proc = spawn(bin, [], { env: { ...process.env, REDIS_URL: redisURL }, stdio: ["pipe", "pipe", "inherit"] });
    createInterface({ input: this.#proc.stdout }).on("line", (line) => {
      const w = this.#waiting.shift();
      const a = JSON.parse(line);
      if (a.error) w.fail(new Error(`batonctl: ${a.error}`));
      else w.ok(a.lease);
    });
    this.#proc.on("exit", (code) => {
      for (const w of this.#waiting.splice(0)) w.fail(new Error(`batonctl exited (${code})`));
    });
  }

  request(req) {
    return new Promise((ok, fail) => {
      this.#waiting.push({ ok, fail });
      this.#proc.stdin.write(JSON.stringify(req) + "\n");
    });
  }

  /** Submits a one-node run on thread (which must be idle) and claims its node. */
  claim(prefix, thread, worker, ttlMs = 10 * 60_000) {
    return this.request({ op: "claim", prefix, thread, worker, ttl_ms: ttlMs });
  }

  /** Claims lease's node again once its lease has run out (a takeover: epoch+1). */
  takeover(prefix, lease, worker, ttlMs = 10 * 60_000) {
    return this.request({ op: "takeover", prefix, lease, worker, ttl_ms: ttlMs });
  }

  /** Renews lease for ttlMs from now, as a runner's heartbeat does. */
  heartbeat(prefix, lease, ttlMs) {
    return this.request({ op: "heartbeat", prefix, lease, ttl_ms: ttlMs });
  }

  /** Cancels lease's run. */
  cancel(prefix, lease) {
    return this.request({ op: "cancel", prefix, lease });
  }

  /** Commits lease's node, ending its run. */
  commit(prefix, lease) {
    return this.request({ op: "commit", prefix, lease });
  }

  async close() {
    const exited = new Promise((r) => this.#proc.once("exit", r));
    this.#proc.stdin.end();
    await exited;
  }
}

/**
 * Leases for whatever threads a test writes to: the first write to a thread
 * submits a one-node run on it and claims the node (a live claim with a
 * long lease); later writes reuse that claim. This is how the conformance
 * suite, which writes to many thread_ids, writes fenced everywhere.
 */
export class LeaseBook {
  #leases = new Map();

  constructor(ctl, prefix, worker = "vitest") {
    this.ctl = ctl;
    this.prefix = prefix;
    this.worker = worker;
  }

  lease(thread) {
    let l = this.#leases.get(thread);
    if (!l) {
      l = this.ctl.claim(this.prefix, thread, this.worker);
      this.#leases.set(thread, l);
    }
    return l;
  }
}

/** The environment the exec kind gives its command, for a lease. */
export function execEnv(redisURL, prefix, lease) {
  return {
    BATON_REDIS_URL: redisURL,
    BATON_PREFIX: prefix,
    BATON_FENCING_TOKEN: lease.token,
    BATON_THREAD_ID: lease.thread,
    BATON_WORKER_ID: lease.worker,
    BATON_RUN_ID: lease.run,
    BATON_NODE_ID: lease.node,
    BATON_EPOCH: String(lease.epoch),
  };
}

/**
 * Runs `node file` with env added to this process's environment (its pipes
 * read, unless read is false); resolves
 * when it exits with {code, stdout, stderr, ms, firstOutMs} (ms from the
 * start to the exit, firstOutMs to its first output).
 */
export function runScript(file, env, { timeoutMs = 20_000, read = true } = {}) {
  return new Promise((ok, fail) => {
    const started = performance.now();
    const proc = spawn(process.execPath, [file], { cwd: packageDir, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let firstOutMs;
    if (read) {
      proc.stdout.on("data", (b) => {
        firstOutMs ??= performance.now() - started;
        stdout += b;
      });
      proc.stderr.on("data", (b) => (stderr += b));
    } else {
      // Nobody reads the pipes, as when the runner is paused: they fill up.
      proc.stdout.pause();
      proc.stderr.pause();
    }
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      fail(new Error(`${file} did not exit within ${timeoutMs} ms; stderr:\n${stderr}`));
    }, timeoutMs);
    proc.on("error", fail);
    proc.on("exit", (code, signal) => {
      clearTimeout(timer);
      ok({ code, signal, stdout, stderr, ms: performance.now() - started, firstOutMs });
    });
  });
}

/** Deletes every key under prefix. */
export async function dropPrefix(redis, prefix) {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== "0");
}
