import { BaseCheckpointSaver } from "@langchain/langgraph-checkpoint";
import { BatonError } from "./errors.js";

export const OUTSIDE_A_NODE =
  "baton: this checkpointer is BatonSaver.fromEnv() outside a baton exec node " +
  "(neither BATON_FENCING_TOKEN nor BATON_REDIS_URL is set). Importing the graph is fine; " +
  "running it needs the node's lease: run it as an exec node, serve the project with " +
  "LANGGRAPH_CONFIG (the graph worker puts its own saver in place of this one), " +
  "or read a thread with a read-only BatonSaver";

/**
 * What fromEnv() returns when the process is not an exec node: a graph
 * module that builds its checkpointer at import (as the docs teach)
 * imports anywhere, a test, a notebook, the graph worker, and the first
 * read or write says why it cannot run, never touching Redis.
 */
export class DetachedSaver extends BaseCheckpointSaver {
  lost = undefined;
  signal = new AbortController().signal;

  async getTuple() { throw new BatonError(OUTSIDE_A_NODE); }
  async put() { throw new BatonError(OUTSIDE_A_NODE); }
  async putWrites() { throw new BatonError(OUTSIDE_A_NODE); }
  async deleteThread() { throw new BatonError(OUTSIDE_A_NODE); }
  // eslint-disable-next-line require-yield
  async *list() { throw new BatonError(OUTSIDE_A_NODE); }
  async close() {}
}
