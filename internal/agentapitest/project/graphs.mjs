// The graphs the side-by-side test runs, on LangGraph's reference server
// and on baton. python/graphs.py holds the same graphs in Python; keep the
// two alike (node names, state keys, values), as the transcripts must be.
import {
  Annotation,
  MessagesAnnotation,
  StateGraph,
  START,
  END,
  interrupt,
} from "@langchain/langgraph";
import { FakeListChatModel } from "@langchain/core/utils/testing";

// Waits ms, or less when the run is cancelled: LangGraph then stops the
// run itself, as it does for a node that returns after its signal fired.
const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });

const Steps = Annotation.Root({
  topic: Annotation(),
  steps: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  answer: Annotation(),
  delay_ms: Annotation(),
});

// agent: two nodes, plan then write. delay_ms makes each node wait, so a
// run stays busy long enough to be cancelled, doubled or cut.
export const agent = new StateGraph(Steps)
  .addNode("plan", async (s, config) => {
    if (s.delay_ms) await sleep(s.delay_ms, config.signal);
    return { steps: [`plan ${s.topic}`] };
  })
  .addNode("write", async (s, config) => {
    if (s.delay_ms) await sleep(s.delay_ms, config.signal);
    return { steps: ["write"], answer: `hi: ${s.topic} in ${s.steps.length + 1} steps` };
  })
  .addEdge(START, "plan")
  .addEdge("plan", "write")
  .addEdge("write", END)
  .compile();

// ask: stops at interrupt() for a human's answer, then finishes.
export const ask = new StateGraph(Steps)
  .addNode("ask", async (s) => {
    const answer = interrupt({ question: `publish ${s.topic}?` });
    return { steps: ["ask"], answer };
  })
  .addNode("finish", async (s) => ({ steps: [`finish ${s.answer}`] }))
  .addEdge(START, "ask")
  .addEdge("ask", "finish")
  .addEdge("finish", END)
  .compile();

// chat: a fake streaming chat model (one token per character) and a
// custom stream chunk before and after it.
export const chat = new StateGraph(MessagesAnnotation)
  .addNode("model", async (s, config) => {
    config.writer?.({ status: "thinking" });
    const model = new FakeListChatModel({ responses: ["hello there"] });
    const reply = await model.invoke(s.messages, config);
    config.writer?.({ status: "done" });
    return { messages: [reply] };
  })
  .addEdge(START, "model")
  .addEdge("model", END)
  .compile();

const Notes = Annotation.Root({
  group: Annotation(),
  user: Annotation(),
  note: Annotation(),
  seen: Annotation(),
});

// notes: writes an item to the store under ["notes", group, user], reads
// it back, lists the group's notes, and streams custom chunks
// (config.writer) along the way.
export const notes = new StateGraph(Notes)
  .addNode("remember", async (s, config) => {
    const ns = ["notes", s.group, s.user];
    config.writer?.({ saving: s.note });
    await config.store.put(ns, "last", { text: s.note });
    const item = await config.store.get(ns, "last");
    config.writer?.({ saved: item?.value ?? null });
    const found = await config.store.search(["notes", s.group]);
    return { seen: found.map((i) => i.value.text).sort() };
  })
  .addEdge(START, "remember")
  .addEdge("remember", END)
  .compile();
