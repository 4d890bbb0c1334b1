package agentapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// sdkScript drives the threads and assistants routes through LangGraph's
// Python SDK (langgraph-sdk, sync client), as a user's code calls them,
// and checks what the SDK hands back.
const sdkScript = `
import os, httpx
from langgraph_sdk import get_sync_client

c = get_sync_client(url=os.environ["API_URL"], api_key=None)
T1, AID = os.environ["T1"], os.environ["AID"]

def status_of(fn):
    try:
        fn()
    except httpx.HTTPStatusError as e:
        return e.response.status_code
    return 200

t = c.threads.create(thread_id=T1, metadata={"user": "ann"})
assert t["thread_id"] == T1 and t["status"] == "idle", t
assert status_of(lambda: c.threads.create(thread_id=T1)) == 409
assert c.threads.create(thread_id=T1, if_exists="do_nothing")["metadata"] == {"user": "ann"}
t = c.threads.update(T1, metadata={"tag": "x"})
assert t["metadata"] == {"user": "ann", "tag": "x"}, t
assert [x["thread_id"] for x in c.threads.search(metadata={"tag": "x"})] == [T1]
assert c.threads.count(status="idle") == 1
assert c.threads.get(T1)["interrupts"] == {}
cp = c.threads.copy(T1)
assert cp["thread_id"] != T1
assert c.threads.prune([cp["thread_id"]]) == {"pruned_count": 1}

st = c.threads.get_state(T1)
assert st["values"] == {} and st["next"] == [], st
assert c.threads.get_history(T1) == []
assert status_of(lambda: c.threads.get("00000000-0000-4000-8000-000000000000")) == 404

a = c.assistants.get("agent")
assert a["graph_id"] == "agent" and a["version"] == 1, a
assert c.assistants.count(graph_id="agent") == 1
a = c.assistants.create(graph_id="agent", assistant_id=AID, name="helper", config={"configurable": {"m": 1}}, metadata={"team": "a"})
assert a["assistant_id"] == AID and a["name"] == "helper"
assert status_of(lambda: c.assistants.create(graph_id="agent", assistant_id=AID)) == 409
a = c.assistants.update(AID, metadata={"tier": "gold"})
assert a["version"] == 2 and a["metadata"] == {"team": "a", "tier": "gold"}, a
assert [v["version"] for v in c.assistants.get_versions(AID)] == [2, 1]
assert c.assistants.set_latest(AID, 1)["version"] == 1
assert {x["assistant_id"] for x in c.assistants.search(graph_id="agent")} == {AID, a["assistant_id"]} | {c.assistants.get("agent")["assistant_id"]}
page = c.assistants.search(limit=1, response_format="object")
assert len(page["assistants"]) == 1 and page["next"] == "1", page
assert c.assistants.get_schemas(AID)["graph_id"] == "agent"
assert "nodes" in c.assistants.get_graph(AID)
assert c.assistants.get_subgraphs(AID) == {}
c.assistants.delete(AID)
assert status_of(lambda: c.assistants.get(AID)) == 404

c.threads.delete(T1)
assert status_of(lambda: c.threads.get(T1)) == 404
print("ok")
`

// TestThreadsThroughThePythonSDK: LangGraph's own Python client drives the
// routes and reads what they answer. It needs LANGGRAPH_SDK_PYTHON, an
// interpreter with langgraph-sdk, and skips without it.
func TestThreadsThroughThePythonSDK(t *testing.T) {
	t.Parallel()
	py := os.Getenv("LANGGRAPH_SDK_PYTHON")
	if py == "" {
		t.Skip("LANGGRAPH_SDK_PYTHON is not set")
	}
	b := newBundle(t, redistest.Start(t).Client(t))
	script := filepath.Join(t.TempDir(), "sdk.py")
	require.NoError(t, os.WriteFile(script, []byte(sdkScript), 0o644))
	cmd := exec.CommandContext(t.Context(), py, script)
	cmd.Env = append(os.Environ(), "API_URL="+b.url, "T1="+tid1, "AID="+aid)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "ok\n", string(out))
}

// sdkScriptJS is sdkScript's twin through LangGraph's JS SDK
// (@langchain/langgraph-sdk).
const sdkScriptJS = `
const { Client } = await import(process.env.SDK_PATH);
const assert = (ok, what) => { if (!ok) { console.log("FAILED: " + what); process.exit(1); } };
const c = new Client({ apiUrl: process.env.API_URL, apiKey: null, callerOptions: { maxRetries: 0 } });
const T1 = process.env.T1, AID = process.env.AID;
const statusOf = async (p) => { try { await p; return 200; } catch (e) { return e.status ?? String(e); } };

let t = await c.threads.create({ threadId: T1, metadata: { user: "ann" }, graphId: "agent" });
assert(t.thread_id === T1 && t.status === "idle" && t.metadata.graph_id === "agent", JSON.stringify(t));
assert(await statusOf(c.threads.create({ threadId: T1 })) === 409, "409 on raise");
t = await c.threads.update(T1, { metadata: { tag: "x" } });
assert(t.metadata.tag === "x" && t.metadata.user === "ann", JSON.stringify(t));
assert((await c.threads.search({ metadata: { tag: "x" } })).length === 1, "search");
assert(await c.threads.count({ status: "idle" }) === 1, "count");
const st = await c.threads.getState(T1);
assert(JSON.stringify(st.values) === '{"n":1}', JSON.stringify(st));
assert((await c.threads.getHistory(T1, { limit: 2 })).length === 1, "history");
const a = await c.assistants.get("agent");
assert(a.graph_id === "agent" && a.version === 1, JSON.stringify(a));
const mine = await c.assistants.create({ graphId: "agent", assistantId: AID, metadata: { team: "a" } });
assert(mine.assistant_id === AID && mine.name === "agent", JSON.stringify(mine));
assert((await c.assistants.update(AID, { metadata: { tier: "gold" } })).version === 2, "update");
assert((await c.assistants.getVersions(AID)).length === 2, "versions");
assert((await c.assistants.setLatest(AID, 1)).version === 1, "setLatest");
assert((await c.assistants.search({ graphId: "agent" })).length === 2, "assistants search");
assert(await c.assistants.count({ graphId: "agent" }) === 2, "assistants count");
assert((await c.assistants.getSchemas(AID)).graph_id === "agent", "schemas");
await c.assistants.delete(AID);
assert(await statusOf(c.assistants.get(AID)) === 404, "404 after delete");
await c.threads.delete(T1);
assert(await statusOf(c.threads.get(T1)) === 404, "thread 404 after delete");
console.log("ok");
`

// TestThreadsThroughTheJSSDK: LangGraph's JS client drives the routes. It
// needs LANGGRAPH_JS_SDK, the path of @langchain/langgraph-sdk's
// dist/index.js, and skips without it.
func TestThreadsThroughTheJSSDK(t *testing.T) {
	t.Parallel()
	sdk := os.Getenv("LANGGRAPH_JS_SDK")
	if sdk == "" {
		t.Skip("LANGGRAPH_JS_SDK is not set")
	}
	b := newBundle(t, redistest.Start(t).Client(t))
	script := filepath.Join(t.TempDir(), "sdk.mjs")
	require.NoError(t, os.WriteFile(script, []byte(sdkScriptJS), 0o644))
	cmd := exec.CommandContext(t.Context(), "node", script)
	cmd.Env = append(os.Environ(), "API_URL="+b.url, "T1="+tid1, "AID="+aid, "SDK_PATH="+sdk)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "ok\n", string(out))
}
