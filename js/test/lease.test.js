// A saver made by fromEnv() is safe with LangGraph's defaults: it never
// keeps a finished program alive, and it stops a program whose lease is
// gone, even in a step that never calls it. Each case runs a real node
// process with the exec kind's environment.
import { Redis } from "ioredis";
import { inject } from "vitest";

import { BatonLeaseLostError, BatonSaver, EXIT_LEASE_LOST } from "../src/index.js";
import { Batonctl, dropPrefix, execEnv, runScript } from "./harness.js";

let redis;
let ctl;
let n = 0;
let prefix;

beforeAll(() => {
  redis = new Redis(inject("redisURL"));
  ctl = new Batonctl(inject("batonctl"), inject("redisURL"));
});
afterAll(async () => {
  await ctl.close();
  await redis.quit();
});
beforeEach(() => {
  n += 1;
  prefix = `lease${n}`;
});
afterEach(async () => {
  await dropPrefix(redis, prefix);
});

const env = (lease) => execEnv(inject("redisURL"), prefix, lease);

describe("a fromEnv() saver", () => {
  it("does not keep a program alive once its main code has finished", async () => {
    const lease = await ctl.claim(prefix, "t-done", "w");
    const r = await runScript("test/fixtures/put-and-finish.mjs", env(lease), { timeoutMs: 10_000 });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("saved\n");
    expect(r.ms).toBeLessThan(5_000); // the lease is 10 minutes: nothing waited for it
  });

  it("keeps a program alive while it waits for a reply, pipelined ones included", async () => {
    const lease = await ctl.claim(prefix, "t-wait", "w");
    const r = await runScript("test/fixtures/check-claim.mjs", env(lease), { timeoutMs: 10_000 });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("true\n");
  });

  it("ends a program whose lease runs out, with code 75, within the lease", async () => {
    // Nobody renews the lease: its runner is paused, as far as Redis can tell.
    const ttl = 1500;
    const lease = await ctl.claim(prefix, "t-expire", "w", ttl);
    const r = await runScript("test/fixtures/long-step.mjs", env(lease));
    expect(r.code).toBe(EXIT_LEASE_LOST);
    expect(r.stderr).toMatch(/lease ran out .* the runner stopped renewing it; exiting with code 75/);
    // The deadline was at most ttl after the start; a program that was
    // slow to start (a busy machine) reads its lease at once when it is up.
    expect(r.ms - Math.max(ttl, r.firstOutMs)).toBeLessThan(1000);
  });

  it("ends a program whose pipes nobody reads (its runner is paused) when its lease runs out", async () => {
    const ttl = 1500;
    const lease = await ctl.claim(prefix, "t-noisy", "w", ttl);
    const r = await runScript("test/fixtures/long-step-noisy.mjs", env(lease), { read: false });
    expect(r.code).toBe(EXIT_LEASE_LOST);
    expect(r.ms).toBeLessThan(ttl + 5000); // not hung: Node queues writes to a full pipe
  });

  it("ends a program whose node another worker took over", async () => {
    const lease = await ctl.claim(prefix, "t-takeover", "w", 800);
    const proc = runScript("test/fixtures/long-step.mjs", env(lease));
    await ctl.takeover(prefix, lease, "w2");
    const r = await proc;
    expect(r.code).toBe(EXIT_LEASE_LOST);
    expect(r.stderr).toMatch(/lost: (the node was claimed again \(epoch 2\)|its lease ran out)/);
  });

  it("keeps a program running while its lease is renewed, and stops it when its run is cancelled", async () => {
    const ttl = 900;
    const lease = await ctl.claim(prefix, "t-renewed", "w", ttl);
    const proc = runScript("test/fixtures/long-step.mjs", env(lease));
    // Renew for three leases' worth, as the runner's heartbeater does.
    const until = performance.now() + 3 * ttl;
    let exited = false;
    proc.then(() => (exited = true));
    while (performance.now() < until) {
      await ctl.heartbeat(prefix, lease, ttl);
      await new Promise((r) => setTimeout(r, ttl / 3));
    }
    expect(exited).toBe(false);
    await ctl.cancel(prefix, lease);
    await ctl.heartbeat(prefix, lease, ttl); // the runner's renewals go on until it stops the node
    const r = await proc;
    expect(r.code).toBe(EXIT_LEASE_LOST);
    expect(r.stderr).toMatch(/the run was cancelled/);
  });

  it("with onLost: \"abort\" aborts its signal and fails every later call instead of exiting", async () => {
    const lease = await ctl.claim(prefix, "t-abort", "w", 600);
    const r = await runScript("test/fixtures/long-step-abort.mjs", env(lease));
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ lost: true, reason: "lease_expired", laterThrows: true });
  });

  it("records its run in every checkpoint's metadata, and a refused write makes later calls fail", async () => {
    const old = await ctl.claim(prefix, "t-meta", "w", 300);
    const s = BatonSaver.fromEnv({ onLost: "abort", watch: false }, env(old));
    try {
      const cfg = await s.put({ configurable: { thread_id: "t-meta" } }, { v: 4, id: "c1", ts: "", channel_values: {}, channel_versions: {}, versions_seen: {} }, { step: -1 }, {});
      expect((await s.getTuple(cfg)).metadata).toEqual({ step: -1, baton_run: old.run });
      await ctl.takeover(prefix, old, "w2");
      await expect(s.put(cfg, { v: 4, id: "c2", ts: "", channel_values: {}, channel_versions: {}, versions_seen: {} }, {}, {})).rejects.toMatchObject({ code: -10 });
      expect(s.signal.aborted).toBe(true);
      await expect(s.getTuple(cfg)).rejects.toBe(s.signal.reason);
      expect(await s.checkClaim().catch((e) => e)).toBe(s.signal.reason);
    } finally {
      await s.close();
    }
  });

  it("checkClaim() tells a live claim from a lost one without writing", async () => {
    const lease = await ctl.claim(prefix, "t-check", "w");
    const s = BatonSaver.fromEnv({ onLost: "abort", watch: false }, env(lease));
    try {
      expect(await s.checkClaim()).toBe(true);
      await ctl.cancel(prefix, lease);
      expect(await s.checkClaim()).toBe(false);
      expect(s.lost).toBeInstanceOf(BatonLeaseLostError);
      expect(s.lost.reason).toBe("cancelled");
    } finally {
      await s.close();
    }
  });
});
