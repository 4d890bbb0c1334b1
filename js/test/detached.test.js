// A graph module written as the docs teach builds its checkpointer at
// import with BatonSaver.fromEnv(). Imported where no node runs (a test, a
// notebook, the graph worker) it imports; running it says why it cannot,
// naming the way out, and touches no Redis.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

describe("BatonSaver.fromEnv() outside an exec node", () => {
  it("lets the graph module import and refuses its first use, saying why", () => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("BATON_")));
    const out = execFileSync(process.execPath, [fileURLToPath(new URL("fixtures/detached-graph.mjs", import.meta.url))], {
      env, cwd: fileURLToPath(new URL("..", import.meta.url)), encoding: "utf8", timeout: 60_000,
    }).trim();
    expect(out).toMatch(/^BatonError baton: this checkpointer is BatonSaver.fromEnv\(\) outside a baton exec node/);
    expect(out).toContain("LANGGRAPH_CONFIG");
  });
});
