package agentapi

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/spec"
)

// The default assistant of graph "agent", as the reference derives it
// (Python: uuid.uuid5(UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8"), "agent")).
const agentAssistant = "fe096781-5601-53d2-b2f6-0d3403f7e9ca"

func decodeCron(t *testing.T, body string) map[string]any {
	t.Helper()
	var c map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &c), body)
	return c
}

// Crons as the SDKs drive them: created on a thread or stateless,
// searched, counted, patched, fired as a baton schedule's tick, deleted.
func TestCronRoutes(t *testing.T) {
	t.Parallel()
	m, rdb := redistest.Mini(t)
	clock := time.Date(2026, 12, 8, 10, 0, 30, 0, time.UTC)
	m.SetTime(clock)
	ts, c := storeServer(t, rdb)
	ctx := t.Context()
	thread := "0b0e2a4c-3c2f-4c52-9a52-5d1f0c1f7a10"

	code, body := storeCall(t, ts, "POST", "/threads/"+thread+"/runs/crons",
		`{"assistant_id":"agent","schedule":"*/5 * * * *","input":{"topic":"news"},"metadata":{"owner":"ada"},"multitask_strategy":"enqueue"}`)
	require.Equal(t, http.StatusOK, code, body)
	onThread := decodeCron(t, body)
	require.Len(t, onThread["cron_id"], 36)
	require.Equal(t, agentAssistant, onThread["assistant_id"], "a graph id stands for its default assistant")
	require.Equal(t, thread, onThread["thread_id"])
	require.Equal(t, "*/5 * * * *", onThread["schedule"])
	require.Equal(t, "2026-12-08T10:05:00.000Z", onThread["next_run_date"])
	require.Equal(t, map[string]any{"owner": "ada"}, onThread["metadata"])
	require.Equal(t, true, onThread["enabled"])
	require.Equal(t, map[string]any{"assistant_id": agentAssistant, "input": map[string]any{"topic": "news"},
		"metadata": map[string]any{"owner": "ada"}, "multitask_strategy": "enqueue"}, onThread["payload"])

	code, body = storeCall(t, ts, "POST", "/runs/crons", `{"assistant_id":"`+agentAssistant+`","schedule":"0 9 * * *","timezone":"Europe/Paris"}`)
	require.Equal(t, http.StatusOK, code, body)
	stateless := decodeCron(t, body)
	require.Nil(t, stateless["thread_id"])
	require.Equal(t, "Europe/Paris", stateless["timezone"])
	require.Equal(t, "2026-12-09T08:00:00.000Z", stateless["next_run_date"])

	// A baton schedule of its own is no cron of the API.
	_, _, err := c.PutSchedule(ctx, &spec.Schedule{Name: "nightly", Cron: "@daily",
		Run: &spec.Run{Nodes: []spec.Node{{ID: "a", Kind: "sleep", Input: json.RawMessage(`{"duration":"1s"}`)}}}})
	require.NoError(t, err)

	code, body = storeCall(t, ts, "POST", "/runs/crons/search", `{}`)
	require.Equal(t, http.StatusOK, code)
	var all []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &all))
	require.Len(t, all, 2)
	code, body = storeCall(t, ts, "POST", "/runs/crons/search", `{"thread_id":"`+thread+`","select":["cron_id","thread_id"]}`)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `[{"cron_id":"`+onThread["cron_id"].(string)+`","thread_id":"`+thread+`"}]`, body)
	code, body = storeCall(t, ts, "POST", "/runs/crons/search", `{"sort_by":"next_run_date","sort_order":"asc","limit":1}`)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, onThread["cron_id"])
	code, body = storeCall(t, ts, "POST", "/runs/crons/count", `{"assistant_id":"agent"}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "2", body[:1])
	code, body = storeCall(t, ts, "POST", "/runs/crons/count", `{"metadata":{"owner":"ada"}}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "1", body[:1])

	// A tick fires the cron's run: one graph node on the thread.
	m.SetTime(clock.Add(5 * time.Minute))
	fired, err := c.FireDue(ctx, time.Hour)
	require.NoError(t, err)
	var run string
	for _, f := range fired {
		if f.Schedule == onThread["cron_id"] {
			run = f.Run
		}
	}
	require.Equal(t, "cron."+onThread["cron_id"].(string)+".20261208T100500Z", run)
	info, err := c.Status(ctx, run)
	require.NoError(t, err)
	require.Equal(t, thread, info.Thread)
	require.Equal(t, "graph", info.Nodes[0].Kind)
	input, err := rdb.HGet(ctx, c.Store().Keys().Node(thread, run, "graph"), "input").Result()
	require.NoError(t, err)
	require.JSONEq(t, `{"graph":"agent","assistant_id":"`+agentAssistant+`","input":{"topic":"news"},"metadata":{"owner":"ada"},"interrupts":"end"}`, input)

	// Patch: a new schedule, input merged; the rest kept.
	code, body = storeCall(t, ts, "PATCH", "/runs/crons/"+onThread["cron_id"].(string), `{"schedule":"0 * * * *","input":{"topic":"sport"}}`)
	require.Equal(t, http.StatusOK, code, body)
	patched := decodeCron(t, body)
	require.Equal(t, "0 * * * *", patched["schedule"])
	require.Equal(t, map[string]any{"topic": "sport"}, patched["payload"].(map[string]any)["input"])
	require.Equal(t, thread, patched["thread_id"])

	code, _ = storeCall(t, ts, "DELETE", "/runs/crons/"+onThread["cron_id"].(string), "")
	require.Equal(t, http.StatusNoContent, code)
	code, _ = storeCall(t, ts, "DELETE", "/runs/crons/"+onThread["cron_id"].(string), "")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = storeCall(t, ts, "DELETE", "/runs/crons/nightly", "")
	require.Equal(t, http.StatusUnprocessableEntity, code, "a cron id is a UUID, as the reference checks")
	_, err = c.Schedule(ctx, "nightly")
	require.NoError(t, err)
	code, body = storeCall(t, ts, "POST", "/runs/crons/count", `{}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "1", body[:1])
}

// Bad input names the field; nothing is stored.
func TestCronRoutesBadInput(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	ts, c := storeServer(t, rdb)
	for _, tc := range []struct {
		body string
		code int
		msg  string
	}{
		{`{"assistant_id":"nope","schedule":"* * * * *"}`, 404, "Assistant \\\"nope\\\" not found"},
		{`{"assistant_id":"agent"}`, 422, "required"},
		{`{"assistant_id":"agent","schedule":"every day"}`, 422, "schedule: "},
		{`{"assistant_id":"agent","schedule":"* * * * *","timezone":"Mars/Base"}`, 422, "timezone: "},
		{`{"assistant_id":"agent","schedule":"* * * * *","end_time":"2027-01-01T00:00:00Z"}`, 422, "end_time: not supported yet"},
		{`{"assistant_id":"agent","schedule":"* * * * *","enabled":false}`, 422, "enabled: false is not supported yet"},
		{`{"assistant_id":"agent","schedule":"* * * * *","multitask_strategy":"sometimes"}`, 422, "multitask"},
		{`{"assistant_id":"agent","schedule":5}`, 422, "schedule: expected string"},
	} {
		code, body := storeCall(t, ts, "POST", "/runs/crons", tc.body)
		require.Equal(t, tc.code, code, "%s: %s", tc.body, body)
		require.Contains(t, body, tc.msg, tc.body)
	}
	code, body := storeCall(t, ts, "POST", "/threads/not-a-uuid/runs/crons", `{"assistant_id":"agent","schedule":"* * * * *"}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, body)
	require.Contains(t, body, "thread_id: must be a UUID")
	code, body = storeCall(t, ts, "PATCH", "/runs/crons/0b0e2a4c-3c2f-4c52-9a52-5d1f0c1f7a10", `{"schedule":"0 * * * *"}`)
	require.Equal(t, http.StatusNotFound, code, body)
	code, _ = storeCall(t, ts, "POST", "/runs/crons/search", `{"limit":0}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	all, err := c.Schedules(t.Context())
	require.NoError(t, err)
	require.Empty(t, all)
}
