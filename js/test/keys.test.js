import { describe, expect, it } from "vitest";
import { Keys, shardOf } from "../src/keys.js";

// The vectors are fence.Keys's (Go) for the same ids: the saver must name
// exactly the keys the runner's scripts and reads use.
describe("Keys", () => {
  it("builds the keys fence/keys.go builds", () => {
    const k = new Keys();
    expect(k.node("t1", "r", "n")).toBe("baton:{s6.40}:t1:node:r:n");
    expect(k.checkpoints("chat-7")).toBe("baton:{s15.42}:chat-7:cp");
    expect(k.node("1f1ed51e-d2f7-6400-8003-675ff14c6c5d", "r", "n")).toBe(
      "baton:{s13.1}:1f1ed51e-d2f7-6400-8003-675ff14c6c5d:node:r:n",
    );
    expect(k.checkpoints("a")).toBe("baton:{s12.2}:a:cp");
    expect(new Keys("p").checkpointNS("x", "ns")).toEqual([
      "p:{s7.43}:x:cpv:ns",
      "p:{s7.43}:x:cpd:ns",
      "p:{s7.43}:x:cpi:ns",
      "p:{s7.43}:x:cpw:ns",
    ]);
    expect([shardOf("t1"), shardOf("chat-7"), shardOf("a")]).toEqual([6, 15, 12]);
  });

  it("parses a thread back from its namespace hash only", () => {
    const k = new Keys();
    expect(k.threadOf(k.checkpoints("chat-7"))).toBe("chat-7");
    expect(k.threadOf(k.checkpointNS("chat-7", "cp")[0])).toBeUndefined(); // a namespace named "cp"
    expect(k.threadOf("baton:{s0.1}:chat-7:cp")).toBeUndefined(); // another shard's tag
    expect(k.threadOf("other:{s15.42}:chat-7:cp")).toBeUndefined();
  });
});
