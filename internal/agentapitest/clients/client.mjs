// Drives an Agent Server with LangGraph's official JS SDK and prints a
// normalised transcript (JSON) of what it saw: event names and order,
// payloads with ids and times replaced by placeholders. The same steps, and
// the same transcript keys, as client.py.
//
//   node client.mjs --url http://127.0.0.1:PORT --tag T
import { Client } from "@langchain/langgraph-sdk";
import { RemoteGraph } from "@langchain/langgraph/remote";
import { Annotation, StateGraph, START } from "@langchain/langgraph";

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const url = arg("url");
const tag = arg("tag", "js");

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b/gi;
const TIME = /^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d/;

// Replaces ids and times (in keys too), leaving the shape and every other value. Keys
// are sorted, as client.py's json.dump(sort_keys=True) does.
const norm = (x) => {
  if (Array.isArray(x)) return x.map(norm);
  if (x && typeof x === "object") {
    const out = {};
    for (const k of Object.keys(x).sort()) if (x[k] !== undefined) out[k.replace(UUID, "<id>")] = norm(x[k]);
    return out;
  }
  if (typeof x === "string") return TIME.test(x) ? "<time>" : x.replace(UUID, "<id>");
  return x;
};

// The call a step is in, named in a timeout's record.
let phase;
const at = (label) => (phase = label);
const statusOf = (e) => ({ error: e?.status ?? e?.name ?? String(e) });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The stream's parts as [event, data]; with limit, stops (closing the
// connection) after that many, and returns the last part's id too.
const chunks = async (stream, limit) => {
  const out = [];
  let last;
  for await (const p of stream) {
    out.push([p.event, p.data]);
    last = p.id;
    if (limit && out.length >= limit) break;
  }
  return [out, last];
};

const c = new Client({ apiUrl: url, apiKey: null });
const out = {};

// A step that hangs is recorded as a timeout, and the rest still run.
const STEP_TIMEOUT_MS = 15_000; // the reference's slowest step takes about 3 s
const step = async (name, fn) => {
  const t0 = performance.now();
  phase = undefined;
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error("timeout"), { name: "timeout" })), STEP_TIMEOUT_MS);
  });
  try {
    out[name] = norm(await Promise.race([fn(), timeout]));
  } catch (e) {
    out[name] = e?.name === "timeout" ? { error: "timeout", at: phase ?? null } : statusOf(e);
    console.error(`${name}:`, e);
  } finally {
    clearTimeout(timer);
  }
  console.error(`${name}: ${((performance.now() - t0) / 1000).toFixed(2)}s`);
};

const thread = async () => (await c.threads.create()).thread_id;

const untilRunning = async (tid, rid) => {
  for (let i = 0; i < 400; i++) {
    const run = await c.runs.get(tid, rid);
    if (run.status !== "pending") return run.status;
    await sleep(25);
  }
  return "pending";
};

const multitask = async (strategy) => {
  const tid = await thread();
  const r1 = await c.runs.create(tid, "agent", { input: { topic: "first", delay_ms: 600 } });
  at("until_running");
  await untilRunning(tid, r1.run_id);
  // Started for good: its input is the thread's state (a run only claimed
  // has written nothing a strategy could keep or roll back).
  at("until_state");
  for (let i = 0; i < 400; i++) {
    if ((await c.threads.getState(tid)).values?.topic === "first") break;
    await sleep(25);
  }
  at("create second");
  const res = {};
  let r2;
  try {
    r2 = await c.runs.create(tid, "agent", { input: { topic: "second" }, multitaskStrategy: strategy });
    res.second = { status: r2.status, multitask_strategy: r2.multitask_strategy };
  } catch (e) {
    res.second = statusOf(e);
  }
  if (strategy === "enqueue") {
    at("join first");
    res.first_join = await c.runs.join(tid, r1.run_id);
  }
  at(r2 ? "join second" : "join first");
  if (r2) res.second_join = await c.runs.join(tid, r2.run_id);
  else res.first_join = await c.runs.join(tid, r1.run_id);
  at("read");
  try {
    res.first = (await c.runs.get(tid, r1.run_id)).status;
  } catch (e) {
    res.first = statusOf(e);
  }
  res.state = (await c.threads.getState(tid)).values;
  return res;
};

await step("thread_create", async () => {
  const t = await c.threads.create({ metadata: { owner: tag } });
  const got = await c.threads.get(t.thread_id);
  return { created: t, got };
});

await step("stream", async () => {
  const tid = await thread();
  const s = c.runs.stream(tid, "chat", {
    input: { messages: [{ role: "user", content: "hi" }] },
    streamMode: ["values", "updates", "messages-tuple", "custom"],
  });
  return (await chunks(s))[0];
});

await step("wait_join", async () => {
  const tid = await thread();
  const waited = await c.runs.wait(tid, "agent", { input: { topic: "wait" } });
  const run = await c.runs.create(tid, "agent", { input: { topic: "join" } });
  const joined = await c.runs.join(tid, run.run_id);
  const got = await c.runs.get(tid, run.run_id);
  const listed = await c.runs.list(tid);
  return { wait: waited, created: run, join: joined, run: got, list_statuses: listed.map((r) => r.status).sort() };
});

await step("cancel", async () => {
  const tid = await thread();
  const run = await c.runs.create(tid, "agent", { input: { topic: "c", delay_ms: 2000 } });
  at("until_running");
  const before = await untilRunning(tid, run.run_id);
  at("cancel wait=True");
  await c.runs.cancel(tid, run.run_id, true);
  at("after cancel");
  const got = await c.runs.get(tid, run.run_id);
  const th = await c.threads.get(tid);
  return { before, status: got.status, thread_status: th.status };
});

for (const strategy of ["reject", "interrupt", "rollback", "enqueue"]) {
  await step(`multitask_${strategy}`, () => multitask(strategy));
}

await step("interrupt", async () => {
  const tid = await thread();
  const first = await c.runs.wait(tid, "ask", { input: { topic: "post" } });
  const th = await c.threads.get(tid);
  const st = await c.threads.getState(tid);
  const resumed = await c.runs.wait(tid, "ask", { command: { resume: "yes" } });
  const th2 = await c.threads.get(tid);
  return {
    first,
    thread: { status: th.status, interrupts: th.interrupts },
    state: { next: st.next, tasks: st.tasks, interrupts: st.interrupts },
    resumed,
    status_after: th2.status,
  };
});

await step("interrupt_before", async () => {
  const tid = await thread();
  const first = await c.runs.wait(tid, "agent", { input: { topic: "ib" }, interruptBefore: ["write"] });
  const st = await c.threads.getState(tid);
  const th = await c.threads.get(tid);
  const rest = await c.runs.wait(tid, "agent", { input: null });
  return { first, next: st.next, thread_status: th.status, rest };
});

await step("busy_update", async () => {
  const tid = await thread();
  const run = await c.runs.create(tid, "agent", { input: { topic: "busy", delay_ms: 1500 } });
  at("until_running");
  await untilRunning(tid, run.run_id);
  at("update_state");
  let res;
  try {
    await c.threads.updateState(tid, { values: { topic: "changed" } });
    res = { update: "accepted" };
  } catch (e) {
    res = { update: statusOf(e) };
  }
  at("cancel wait=True");
  await c.runs.cancel(tid, run.run_id, true);
  return res;
});

await step("history", async () => {
  const tid = await thread();
  await c.runs.wait(tid, "agent", { input: { topic: "h" } });
  const hist = await c.threads.getHistory(tid);
  const history = hist.map((s) => ({ next: s.next, values: s.values, step: s.metadata?.step, source: s.metadata?.source }));
  const past = hist.find((s) => JSON.stringify(s.next) === JSON.stringify(["write"]));
  if (!past) return { history, from_past: { error: "no checkpoint with next [write]" } };
  const again = await c.runs.wait(tid, "agent", { input: null, checkpointId: past.checkpoint.checkpoint_id });
  const hist2 = await c.threads.getHistory(tid);
  return {
    history,
    from_past: again,
    history_len_after: hist2.length,
    head_parent_is_past: hist2[0].parent_checkpoint?.checkpoint_id === past.checkpoint.checkpoint_id,
  };
});

await step("reconnect", async () => {
  const tid = await thread();
  let created;
  const s = c.runs.stream(tid, "agent", {
    input: { topic: "rc", delay_ms: 300 },
    streamMode: ["updates"],
    streamResumable: true,
    onDisconnect: "continue",
    onRunCreated: (m) => (created = m),
  });
  const [before, last] = await chunks(s, 2);
  const [after] = await chunks(c.runs.joinStream(tid, created.run_id, { lastEventId: last }));
  const [replay] = await chunks(c.runs.joinStream(tid, created.run_id, { lastEventId: "-1" }));
  const strip = (l) => JSON.stringify(l.filter((e) => e[0] !== "metadata"));
  return { before: before.map((e) => e[0]), after, continues: strip([...before, ...after]) === strip(replay) };
});

await step("remote_graph", async () => {
  const remote = new RemoteGraph({ graphId: "agent", url, apiKey: null });
  const State = Annotation.Root({
    topic: Annotation(),
    steps: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
    answer: Annotation(),
  });
  const local = new StateGraph(State).addNode("remote", remote).addEdge(START, "remote").compile();
  return await local.invoke({ topic: "remote" });
});

await step("store", async () => {
  const tid = await thread();
  const ran = await c.runs.wait(tid, "notes", { input: { group: tag, user: "a", note: "from graph" } });
  const item = await c.store.getItem(["notes", tag, "a"], "last");
  await c.store.putItem(["notes", tag, "b"], "last", { text: "from client" });
  const ran2 = await c.runs.wait(tid, "notes", { input: { group: tag, user: "c", note: "again" } });
  const found = await c.store.searchItems(["notes", tag], { limit: 100 });
  const spaces = await c.store.listNamespaces({ prefix: ["notes", tag] });
  await c.store.deleteItem(["notes", tag, "b"], "last");
  let gone;
  try {
    gone = await c.store.getItem(["notes", tag, "b"], "last");
  } catch (e) {
    gone = statusOf(e);
  }
  const byNs = (a, b) => JSON.stringify(a.namespace).localeCompare(JSON.stringify(b.namespace));
  return {
    graph: ran,
    item,
    graph_again: ran2,
    search: found.items.sort(byNs),
    namespaces: spaces.namespaces.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    deleted: gone,
  };
});

await step("cron", async () => {
  const tid = await thread();
  const made = await c.crons.createForThread(tid, "agent", { schedule: "0 0 1 1 *", input: { topic: "cron" } });
  const found = await c.crons.search({ threadId: tid });
  await c.crons.delete(made.cron_id);
  return { created: made, search: found };
});

process.stdout.write(JSON.stringify(out, null, 1) + "\n", () => process.exit(0)); // a timed-out step may hold the loop
