// LangGraph's own conformance suite for checkpointers, run against
// BatonSaver on a real redis-server. Every write is fenced by a live claim:
// each checkpointer the suite creates gets its own key prefix (the suite
// expects a fresh, empty saver each time, as MemorySaver is), and the first
// write to any thread_id submits a one-node run on that thread and claims
// it through baton's Go code (LeaseBook).
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { Redis } from "ioredis";
import { inject } from "vitest";

import { BatonSaver } from "../src/index.js";
import { Batonctl, LeaseBook, dropPrefix } from "./harness.js";

let redis;
let ctl;
let n = 0;

validate({
  checkpointerName: "BatonSaver",
  beforeAll() {
    redis = new Redis(inject("redisURL"));
    ctl = new Batonctl(inject("batonctl"), inject("redisURL"));
  },
  async afterAll() {
    await ctl.close();
    await redis.quit();
  },
  createCheckpointer() {
    n += 1;
    const book = new LeaseBook(ctl, `lgv${n}`);
    const saver = new BatonSaver({ redis, prefix: book.prefix, leaseFor: (thread) => book.lease(thread) });
    saver.book = book;
    return saver;
  },
  async destroyCheckpointer(saver) {
    await dropPrefix(redis, saver.book.prefix);
  },
});
