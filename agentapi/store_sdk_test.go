package agentapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// storeSDKScript drives the store and the crons with LangGraph's own
// Python SDK (langgraph-sdk, sync and async clients), as a user would.
const storeSDKScript = `
import asyncio, sys
from langgraph_sdk import get_client, get_sync_client

url = sys.argv[1]
c = get_sync_client(url=url)
c.store.put_item(["users", "u1"], "prefs", {"theme": "dark", "n": 3})
c.store.put_item(["users", "u2"], "prefs", {"theme": "light", "n": 7}, ttl=5)
item = c.store.get_item(["users", "u1"], "prefs")
assert item["value"] == {"theme": "dark", "n": 3} and item["namespace"] == ["users", "u1"], item
found = c.store.search_items(["users"], filter={"n": {"$gt": 5}})
assert [i["namespace"] for i in found["items"]] == [["users", "u2"]], found
ns = c.store.list_namespaces(prefix=["users"], max_depth=2)
assert ns["namespaces"] == [["users", "u1"], ["users", "u2"]], ns
c.store.delete_item(["users", "u1"], "prefs")
assert c.store.get_item(["users", "u1"], "prefs") is None

cron = c.crons.create("agent", schedule="*/5 * * * *", input={"topic": "news"}, metadata={"owner": "ada"})
assert cron["assistant_id"] == "fe096781-5601-53d2-b2f6-0d3403f7e9ca" and cron["thread_id"] is None, cron
tc = c.crons.create_for_thread("0b0e2a4c-3c2f-4c52-9a52-5d1f0c1f7a10", "agent", schedule="0 9 * * *", timezone="Europe/Paris")
assert tc["thread_id"] == "0b0e2a4c-3c2f-4c52-9a52-5d1f0c1f7a10" and tc["timezone"] == "Europe/Paris", tc
assert len(c.crons.search()) == 2
assert c.crons.count(assistant_id="agent") == 2
assert [x["cron_id"] for x in c.crons.search(thread_id=tc["thread_id"])] == [tc["cron_id"]]
up = c.crons.update(cron["cron_id"], schedule="0 * * * *", input={"topic": "sport"})
assert up["schedule"] == "0 * * * *" and up["payload"]["input"] == {"topic": "sport"}, up
c.crons.delete(cron["cron_id"])
assert c.crons.count() == 1

async def main():
    a = get_client(url=url)
    await a.store.put_item(["async"], "k", {"v": 1})
    assert (await a.store.get_item(["async"], "k"))["value"] == {"v": 1}
    assert len((await a.store.search_items(["async"]))["items"]) == 1
    assert await a.crons.count() == 1
asyncio.run(main())
print("ok")
`

// LangGraph's Python SDK, sync and async, against the store and cron
// routes.
func TestStoreAndCronsThroughThePythonSDK(t *testing.T) {
	t.Parallel()
	python := filepath.Join(storeRepoDir(), "python", ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no Python virtualenv at %s", python)
	}
	_, rdb := redistest.Mini(t)
	ts, _ := storeServer(t, rdb)
	out, err := exec.CommandContext(t.Context(), python, "-c", storeSDKScript, ts.URL).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "ok")
}

// storeJSSDKScript is the same with LangGraph's JS SDK.
const storeJSSDKScript = `
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const c = new Client({ apiUrl: process.argv.at(-1) });
await c.store.putItem(["users", "u1"], "prefs", { theme: "dark", n: 3 });
await c.store.putItem(["users", "u2"], "prefs", { theme: "light", n: 7 }, { ttl: 5 });
const item = await c.store.getItem(["users", "u1"], "prefs");
assert.deepEqual(item.value, { theme: "dark", n: 3 });
assert.ok(item.createdAt);
const found = await c.store.searchItems(["users"], { filter: { n: { $gt: 5 } } });
assert.deepEqual(found.items.map((i) => i.namespace), [["users", "u2"]]);
assert.deepEqual((await c.store.listNamespaces({ prefix: ["users"] })).namespaces, [["users", "u1"], ["users", "u2"]]);
await c.store.deleteItem(["users", "u1"], "prefs");
assert.equal(await c.store.getItem(["users", "u1"], "prefs"), null);

const cron = await c.crons.create("agent", { schedule: "*/5 * * * *", input: { topic: "news" } });
assert.equal(cron.assistant_id, "fe096781-5601-53d2-b2f6-0d3403f7e9ca");
const tc = await c.crons.createForThread("0b0e2a4c-3c2f-4c52-9a52-5d1f0c1f7a10", "agent", { schedule: "0 9 * * *" });
assert.equal(tc.thread_id, "0b0e2a4c-3c2f-4c52-9a52-5d1f0c1f7a10");
assert.equal((await c.crons.search()).length, 2);
assert.equal(await c.crons.count({ assistantId: "agent" }), 2);
const up = await c.crons.update(cron.cron_id, { schedule: "0 * * * *" });
assert.equal(up.schedule, "0 * * * *");
await c.crons.delete(cron.cron_id);
assert.equal(await c.crons.count(), 1);
console.log("ok");
`

// LangGraph's JS SDK against the store and cron routes.
func TestStoreAndCronsThroughTheJSSDK(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(storeRepoDir(), "js")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk")); err != nil {
		t.Skip("no @langchain/langgraph-sdk in js/node_modules")
	}
	_, rdb := redistest.Mini(t)
	ts, _ := storeServer(t, rdb)
	cmd := exec.CommandContext(t.Context(), "node", "--input-type=module", "-e", storeJSSDKScript, "--", ts.URL)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "ok")
}
