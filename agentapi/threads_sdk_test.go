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
