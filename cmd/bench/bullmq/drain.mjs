// drain.mjs: BullMQ's side of `make bench`. It drains N no-op jobs through
// one BullMQ Worker at a given concurrency, against the Redis in
// BENCH_REDIS_URL (in the environment, so a password stays out of `ps`),
// under its own key prefix, and prints one JSON line of what it measured.
//
// The measurement is the one the Go bench makes of bare Asynq and baton:
// a warm-up, then the queue paused, every job added, the queue resumed, and
// the clock running from the first job's start to the last job's
// completion (its moveToFinished has returned, so a kept job is in the
// completed set and a removed one is gone).
//
//   node drain.mjs --n 20000 --concurrency 16 --mode kept|removed [--k 1]
//                  [--warmup 2000] [--submitters 8] [--prefix bench-bullmq]
//                  [--handshake]
//
// --mode kept adds jobs with removeOnComplete: false (BullMQ keeps every
// completed job: its hash and an entry in the completed set), removed with
// removeOnComplete: true (deleted by the script that completes it).
// --k > 1 makes chains: n/k first jobs, each job's processor adding the
// next of its chain, as the Go bench's Asynq chain baseline does.
//
// With --handshake the Go bench reads Redis's own counters between the
// phases: the script prints {"phase":"ready"} after the warm-up (queue
// paused, empty) and waits for a line on stdin, adds the jobs, prints
// {"phase":"filled",...} and waits for another line, then resumes the
// queue and drains. Without it the phases run straight through. Either way
// the last line is the result:
//
//   {"phase":"drained","drained":N,"drain_s":…,"drained_per_s":…,
//    "submit_s":…,"cpu_user_us":…,"cpu_sys_us":…,"completed_kept":…,
//    "failed":0,"bullmq":"6.7.6","node":"v20…"}
//
// cpu_*_us is this process's CPU (every thread) during the drain alone.
// Exit status: 0 ok, 1 the drain failed or timed out, 2 bad arguments.
import { parseArgs } from "node:util";
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import { Queue, Worker } from "bullmq";
import IORedis from "ioredis";

const { values: a } = parseArgs({
  options: {
    n: { type: "string", default: "20000" },
    concurrency: { type: "string", default: "16" },
    mode: { type: "string", default: "kept" },
    k: { type: "string", default: "1" },
    warmup: { type: "string", default: "2000" },
    submitters: { type: "string", default: "8" },
    prefix: { type: "string", default: "bench-bullmq" },
    "timeout-s": { type: "string", default: "300" },
    handshake: { type: "boolean", default: false },
  },
});
const n = Number(a.n), concurrency = Number(a.concurrency), k = Number(a.k);
const warmup = Number(a.warmup), submitters = Number(a.submitters), timeoutS = Number(a["timeout-s"]);
const url = process.env.BENCH_REDIS_URL;
const bad = [];
if (!url) bad.push("BENCH_REDIS_URL is not set");
if (!(n >= 1)) bad.push(`--n ${a.n}: want at least 1`);
if (!(concurrency >= 1)) bad.push(`--concurrency ${a.concurrency}: want at least 1`);
if (!(k >= 1)) bad.push(`--k ${a.k}: want at least 1`);
if (!(warmup >= 0)) bad.push(`--warmup ${a.warmup}: want 0 or more`);
if (!(submitters >= 1)) bad.push(`--submitters ${a.submitters}: want at least 1`);
if (a.mode !== "kept" && a.mode !== "removed") bad.push(`--mode ${a.mode}: want kept or removed`);
if (bad.length) {
  for (const b of bad) console.error(`drain.mjs: ${b}`);
  process.exit(2);
}

const version = JSON.parse(readFileSync(new URL("./node_modules/bullmq/package.json", import.meta.url))).version;
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const proceed = async () => {
  if (a.handshake && (await lines.next()).done) throw new Error("stdin closed before the bench said to go on");
};

// A connection each for the queue and the worker (which opens its blocking
// one besides), as BullMQ's docs set them up; workers need
// maxRetriesPerRequest null.
const connections = [0, 1].map(() => new IORedis(url, { maxRetriesPerRequest: null }));
const queue = new Queue("bench", {
  connection: connections[0],
  prefix: a.prefix,
  defaultJobOptions: { removeOnComplete: a.mode === "removed", removeOnFail: false },
});

// The processor does nothing but count, and in chains add the next job.
let started = 0, firstStart = 0;
const processor = async (job) => {
  if (started++ === 0) firstStart = performance.now();
  const { chain, step } = job.data;
  if (step + 1 < k) await queue.add("noop", { chain, step: step + 1 });
};
const worker = new Worker("bench", processor, { connection: connections[1], prefix: a.prefix, concurrency, autorun: false });
let failed = null;
worker.on("failed", (job, err) => { failed ??= err; });
worker.on("error", (err) => { failed ??= err; });
let completed = 0, want = 0, onDone = null;
worker.on("completed", () => {
  if (++completed === want && onDone) onDone(performance.now());
});

// drained resolves when want jobs have completed since it was called.
function drained(jobs) {
  completed = 0;
  want = jobs;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${completed} of ${jobs} jobs completed after ${timeoutS}s`)), timeoutS * 1000);
    onDone = (t) => { clearTimeout(timer); resolve(t); };
  });
}

// fill adds the first job of each chain (every job when k is 1) from
// submitters concurrent loops, and returns how many jobs will run.
async function fill(tag, jobs) {
  const heads = Math.ceil(jobs / k);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(submitters, heads) }, async () => {
    for (let i = next++; i < heads; i = next++) await queue.add("noop", { chain: `${tag}-${i}`, step: 0 });
  }));
  return heads * k;
}

async function main() {
  await queue.waitUntilReady();
  await queue.obliterate({ force: true }); // a fresh queue under the prefix
  const run = worker.run();
  run.catch((err) => { failed ??= err; });
  if (warmup > 0) {
    const jobs = Math.ceil(warmup / k) * k;
    const done = drained(jobs);
    await fill("w", jobs);
    await done;
  }
  await queue.pause();
  say({ phase: "ready" });
  await proceed();

  const t0 = performance.now();
  const jobs = await fill("m", n);
  const submitS = (performance.now() - t0) / 1000;
  say({ phase: "filled", jobs, submit_s: submitS });
  await proceed();

  started = 0;
  const done = drained(jobs);
  const cpu0 = process.cpuUsage();
  await queue.resume();
  const end = await done;
  const cpu = process.cpuUsage(cpu0);
  if (failed) throw failed;
  const counts = await queue.getJobCounts("completed", "failed", "wait", "active", "paused");
  const drainS = (end - firstStart) / 1000;
  say({
    phase: "drained", mode: a.mode, k, drained: completed, started, drain_s: drainS,
    drained_per_s: completed / drainS, submit_s: submitS, cpu_user_us: cpu.user, cpu_sys_us: cpu.system,
    completed_kept: counts.completed, failed: counts.failed, left: counts.wait + counts.active + counts.paused,
    bullmq: version, node: process.version,
  });
}

let code = 0;
try {
  await main();
} catch (err) {
  console.error(`drain.mjs: ${err?.stack ?? err}`);
  code = 1;
}
// An open ioredis connection keeps node alive: close everything, then exit.
await Promise.race([
  Promise.allSettled([worker.close(true), queue.close()]).then(() => Promise.allSettled(connections.map((c) => c.quit()))),
  new Promise((r) => setTimeout(r, 3000)),
]).catch(() => {});
process.exit(code);
