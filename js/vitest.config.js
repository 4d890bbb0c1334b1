import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globals: true,
    globalSetup: ["./test/globalSetup.js"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // The conformance suite's one test that LangGraph's own MemorySaver,
    // SQLite and MongoDB savers skip ("TODO: ... doesn't store channel
    // deltas"): BatonSaver, like them, stores each checkpoint whole, and
    // the suite only knows savers by name. Skipped here for that same
    // reason; see README.md.
    testNamePattern: /^(?!.*should only store channel_values that have changed \(based on newVersions\)).*$/,
  },
});
