package agentapi

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

const (
	tid1 = "11111111-1111-4111-8111-111111111111"
	tid2 = "22222222-2222-4222-8222-222222222222"
)

// TestThreadRecords: a thread is created (with or without an id), read,
// patched (metadata merged), searched, counted and deleted as the
// reference answers each, on miniredis and a real Redis.
func TestThreadRecords(t *testing.T) {
	t.Parallel()
	backends(t, threadRecordsFlow)
}

func threadRecordsFlow(t *testing.T, b *bundle) {
	var th threadOut
	b.call(t, "POST", "/threads", `{"thread_id":"`+tid1+`","metadata":{"user":"ann","n":1}}`, http.StatusOK, &th)
	assert.Equal(t, tid1, th.ThreadID)
	assert.Equal(t, "idle", th.Status)
	assert.Equal(t, map[string]any{"user": "ann", "n": 1.0}, th.Metadata)
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, th.CreatedAt)

	assert.Equal(t, "Thread already exists", b.detail(t, "POST", "/threads", `{"thread_id":"`+tid1+`"}`, http.StatusConflict))
	var same threadOut
	b.call(t, "POST", "/threads", `{"thread_id":"`+tid1+`","if_exists":"do_nothing","metadata":{"x":1}}`, http.StatusOK, &same)
	assert.Equal(t, th.Metadata, same.Metadata, "do_nothing answers the thread as it is")

	var gen threadOut
	b.call(t, "POST", "/threads", ``, http.StatusOK, &gen)
	assert.True(t, isUUID(gen.ThreadID), "a new thread gets a UUID: %q", gen.ThreadID)

	var got threadOut
	b.call(t, "GET", "/threads/"+tid1, "", http.StatusOK, &got)
	assert.Equal(t, th.CreatedAt, got.CreatedAt)

	var patched threadOut
	b.call(t, "PATCH", "/threads/"+tid1, `{"metadata":{"n":2,"tag":"x"}}`, http.StatusOK, &patched)
	assert.Equal(t, map[string]any{"user": "ann", "n": 2.0, "tag": "x"}, patched.Metadata)

	var found []threadOut
	b.call(t, "POST", "/threads/search", `{"metadata":{"tag":"x"}}`, http.StatusOK, &found)
	require.Len(t, found, 1)
	assert.Equal(t, tid1, found[0].ThreadID)
	b.call(t, "POST", "/threads/search", `{"sort_by":"thread_id","sort_order":"asc","limit":1}`, http.StatusOK, &found)
	require.Len(t, found, 1)
	b.call(t, "POST", "/threads/search", `{"ids":["`+tid1+`"],"status":"idle","select":["thread_id"]}`, http.StatusOK, &found)
	require.Len(t, found, 1)
	var n int
	b.call(t, "POST", "/threads/count", `{}`, http.StatusOK, &n)
	assert.Equal(t, 2, n)
	b.call(t, "POST", "/threads/count", `{"metadata":{"user":"ann"}}`, http.StatusOK, &n)
	assert.Equal(t, 1, n)

	var cp threadOut
	b.call(t, "POST", "/threads/"+tid1+"/copy", "", http.StatusOK, &cp)
	assert.NotEqual(t, tid1, cp.ThreadID)
	assert.Equal(t, cp.ThreadID, cp.Metadata["thread_id"])
	assert.Equal(t, "ann", cp.Metadata["user"])

	code, _ := b.do(t, "DELETE", "/threads/"+tid1, "")
	assert.Equal(t, http.StatusNoContent, code)
	assert.Equal(t, "Thread with ID "+tid1+" not found", b.detail(t, "GET", "/threads/"+tid1, "", http.StatusNotFound))
	b.detail(t, "DELETE", "/threads/"+tid1, "", http.StatusNotFound)
	b.detail(t, "PATCH", "/threads/"+tid1, `{"metadata":{}}`, http.StatusNotFound)

	var pruned map[string]int
	b.call(t, "POST", "/threads/prune", `{"thread_ids":["`+cp.ThreadID+`","`+tid2+`"]}`, http.StatusOK, &pruned)
	assert.Equal(t, map[string]int{"pruned_count": 1}, pruned)
	b.call(t, "POST", "/threads/count", `{}`, http.StatusOK, &n)
	assert.Equal(t, 1, n)
}

// TestThreadBadInput: each malformed request is answered as the reference
// answers it, naming the field, and nothing is stored.
func TestThreadBadInput(t *testing.T) {
	t.Parallel()
	b := newBundle(t, miniClient(t))
	b.call(t, "POST", "/threads", `{"thread_id":"`+tid1+`"}`, http.StatusOK, nil)
	for _, tc := range []struct {
		method, path, body string
		code               int
		detail             string
	}{
		{"POST", "/threads", `{"metadata":`, 422, "body is not valid JSON"},
		{"POST", "/threads", `{"metadata":"x"}`, 422, "metadata: expected an object"},
		{"POST", "/threads", `{"thread_id":"not-a-uuid"}`, 422, "thread_id: invalid uuid"},
		{"POST", "/threads", `{"thread_id":"` + tid2 + `","if_exists":"maybe"}`, 422, "if_exists"},
		{"POST", "/threads", `{"thread_id":5}`, 422, "thread_id: expected a string"},
		{"POST", "/threads", `{"thread_id":"` + tid2 + `","supersteps":[{"updates":[{"values":{},"as_node":"a"},{"values":{},"as_node":"b"}]}]}`, 422, "supersteps[0].updates"},
		{"POST", "/threads", `{"thread_id":"` + tid2 + `","supersteps":[{"updates":[{"command":{"resume":1},"as_node":"a"}]}]}`, 422, "supersteps[0].updates[0].command"},
		{"POST", "/threads", `{"thread_id":"` + tid2 + `","supersteps":[{"updates":[{"values":{}}]}]}`, 422, "supersteps[0].updates[0].as_node"},
		{"POST", "/threads", `{"thread_id":"` + tid2 + `","supersteps":[{"updates":[{"values":{},"as_node":"a"}]}]}`, 422, "metadata.graph_id"},
		{"POST", "/threads/search", `{"limit":0}`, 422, "limit"},
		{"POST", "/threads/search", `{"limit":"5"}`, 422, "limit: expected a number"},
		{"POST", "/threads/search", `{"status":"sleeping"}`, 422, "status"},
		{"POST", "/threads/search", `{"sort_by":"name"}`, 422, "sort_by"},
		{"POST", "/threads/search", `{"ids":["x"]}`, 422, "ids[0]"},
		{"PATCH", "/threads/" + tid1, `{"metadata":[1]}`, 422, "metadata: expected an object"},
		{"PATCH", "/threads/" + tid1, `{}`, 422, "metadata: required"},
		{"GET", "/threads/abc", "", 422, "thread_id: invalid uuid"},
		{"GET", "/threads/" + tid2, "", 404, "Thread with ID " + tid2 + " not found"},
		{"GET", "/threads/" + tid1 + "/state/xyz", "", 422, "checkpoint_id: invalid uuid"},
		{"POST", "/threads/" + tid1 + "/state", `{"values":"x"}`, 422, "values"},
		{"POST", "/threads/" + tid1 + "/state", `{"values":{}}`, 400, "has no graph ID"},
		{"POST", "/threads/" + tid2 + "/state", `{"values":{}}`, 404, "not found"},
		{"POST", "/threads/" + tid1 + "/history", `{"limit":"x"}`, 422, "limit"},
		{"POST", "/threads/prune", `{"thread_ids":["` + tid1 + `"],"strategy":"all"}`, 422, "strategy"},
		{"POST", "/threads/prune", `{"thread_ids":["x"]}`, 422, "thread_ids[0]"},
	} {
		d := b.detail(t, tc.method, tc.path, tc.body, tc.code)
		assert.Contains(t, d, tc.detail, "%s %s %s", tc.method, tc.path, tc.body)
	}
	var list []threadOut
	b.call(t, "POST", "/threads/search", `{}`, http.StatusOK, &list)
	require.Len(t, list, 1, "no bad request stored a thread")
	assert.Equal(t, map[string]any{}, list[0].Metadata, "nor changed one")
}

// TestThreadStateReads: state and history come from the graph worker
// (Graphs.Call) with the thread's graph; a thread no run stamped has the
// reference's empty state.
func TestThreadStateReads(t *testing.T) {
	t.Parallel()
	b := newBundle(t, miniClient(t))
	b.call(t, "POST", "/threads", `{"thread_id":"`+tid1+`"}`, http.StatusOK, nil)
	var st map[string]any
	b.call(t, "GET", "/threads/"+tid1+"/state", "", http.StatusOK, &st)
	assert.Equal(t, map[string]any{}, st["values"])
	var hist []any
	b.call(t, "POST", "/threads/"+tid1+"/history", `{}`, http.StatusOK, &hist)
	assert.Empty(t, hist)
	assert.Empty(t, b.graphs.asked("get_state"), "no graph to ask")

	require.NoError(t, b.srv.stampThread(t.Context(), tid1, "agent", DefaultAssistantID("agent")))
	var th threadOut
	b.call(t, "GET", "/threads/"+tid1, "", http.StatusOK, &th)
	assert.Equal(t, "agent", th.Metadata["graph_id"])
	assert.Equal(t, DefaultAssistantID("agent"), th.Metadata["assistant_id"])

	const cp = "33333333-3333-4333-8333-333333333333"
	b.call(t, "GET", "/threads/"+tid1+"/state?subgraphs=true", "", http.StatusOK, &st)
	assert.Equal(t, map[string]any{"n": 1.0}, st["values"])
	b.call(t, "GET", "/threads/"+tid1+"/state/"+cp, "", http.StatusOK, &st)
	b.call(t, "POST", "/threads/"+tid1+"/state/checkpoint", `{"checkpoint":{"checkpoint_id":"`+cp+`"}}`, http.StatusOK, &st)
	assert.Equal(t, []string{
		`{"graph":"agent","thread":"` + tid1 + `","subgraphs":true}`,
		`{"graph":"agent","thread":"` + tid1 + `","checkpoint_id":"` + cp + `"}`,
		`{"graph":"agent","thread":"` + tid1 + `","checkpoint_id":"` + cp + `"}`,
	}, b.graphs.asked("get_state"))
	assert.Contains(t, b.detail(t, "GET", "/threads/"+tid1+"/state/"+missingCheckpoint, "", http.StatusNotFound),
		"no checkpoint", "the graph worker's status is the answer's")
	b.call(t, "GET", "/threads/"+tid1+"/history?limit=3&before="+cp, "", http.StatusOK, &hist)
	require.Len(t, hist, 1)
	b.call(t, "POST", "/threads/"+tid1+"/history", `{"limit":5,"metadata":{"step":1}}`, http.StatusOK, &hist)
	assert.Equal(t, []string{
		`{"graph":"agent","thread":"` + tid1 + `","limit":3,"before":"` + cp + `"}`,
		`{"graph":"agent","thread":"` + tid1 + `","limit":5,"metadata":{"step":1}}`,
	}, b.graphs.asked("history"))

	// Stamping again with the same graph writes nothing.
	before := th.UpdatedAt
	require.NoError(t, b.srv.stampThread(t.Context(), tid1, "agent", DefaultAssistantID("agent")))
	b.call(t, "GET", "/threads/"+tid1, "", http.StatusOK, &th)
	assert.Equal(t, before, th.UpdatedAt)
	// A run on a thread the API never saw creates its record.
	require.NoError(t, b.srv.stampThread(t.Context(), tid2, "other", ""))
	th = threadOut{}
	b.call(t, "GET", "/threads/"+tid2, "", http.StatusOK, &th)
	assert.Equal(t, map[string]any{"graph_id": "other"}, th.Metadata)
	assert.Error(t, b.srv.stampThread(t.Context(), "x{y}", "agent", ""))
}

// TestConcurrentPatchesLoseNothing: patches of one thread's metadata and
// of one assistant, sent at once, are each merged: a write made from a
// stale read is refused by the store and redone, never lost.
func TestConcurrentPatchesLoseNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := newBundle(t, srv.Client(t))
	b.call(t, "POST", "/threads", `{"thread_id":"`+tid1+`"}`, http.StatusOK, nil)
	b.call(t, "POST", "/assistants", `{"assistant_id":"`+aid+`","graph_id":"agent"}`, http.StatusOK, nil)
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"metadata":{"k%d":%d}}`, i, i)
			code, raw := b.do(t, "PATCH", "/threads/"+tid1, body)
			assert.Equal(t, http.StatusOK, code, "%s", raw)
			code, raw = b.do(t, "PATCH", "/assistants/"+aid, body)
			assert.Equal(t, http.StatusOK, code, "%s", raw)
		}()
	}
	wg.Wait()
	th := b.thread(t, tid1)
	assert.Len(t, th.Metadata, n, "every patch's key is there: %v", th.Metadata)
	var a assistantOut
	b.call(t, "GET", "/assistants/"+aid, "", http.StatusOK, &a)
	assert.Len(t, a.Metadata, n)
	assert.Equal(t, n+1, a.Version, "each patch made one version")
}

// TestCopyThreadCopiesItsState: a thread's copy has its checkpoints, so
// its state is the source's.
func TestCopyThreadCopiesItsState(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		st := b.client.Store()
		b.call(t, "POST", "/threads", `{"thread_id":"`+tid1+`","metadata":{"graph_id":"agent"}}`, http.StatusOK, nil)
		one := []fence.NodeSpec{{ID: "graph", Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}
		_, err := st.Submit(ctx, fence.SubmitArgs{Run: "r1", Thread: tid1, Multitask: "reject", Digest: "d", Nodes: one})
		require.NoError(t, err)
		c, err := st.Claim(ctx, fence.NodeRef{Thread: tid1, Run: "r1", Node: "graph"}, "w", time.Minute, time.Second)
		require.NoError(t, err)
		_, err = st.SaveCheckpoint(ctx, c.Lease, fence.CheckpointWrite{NS: "", ID: "k1", Data: []byte(`{"v":1}`)})
		require.NoError(t, err)

		var cp threadOut
		b.call(t, "POST", "/threads/"+tid1+"/copy", "", http.StatusOK, &cp)
		assert.Equal(t, "agent", cp.Metadata["graph_id"])
		got, err := st.LatestCheckpoint(ctx, cp.ThreadID, "")
		require.NoError(t, err)
		assert.Equal(t, "k1", got.ID)
		assert.JSONEq(t, `{"v":1}`, string(got.Data))
		assert.Equal(t, "Thread not found", b.detail(t, "POST", "/threads/"+tid2+"/copy", "", http.StatusConflict))

		// keep_latest keeps the thread and its newest checkpoint only.
		_, err = st.SaveCheckpoint(ctx, c.Lease, fence.CheckpointWrite{NS: "", ID: "k2", Data: []byte(`{"v":2}`)})
		require.NoError(t, err)
		var pruned map[string]int
		b.call(t, "POST", "/threads/prune", `{"thread_ids":["`+tid1+`"],"strategy":"keep_latest"}`, http.StatusOK, &pruned)
		assert.Equal(t, map[string]int{"pruned_count": 0}, pruned, "a thread whose run is RUNNING is skipped")
		_, err = st.Commit(ctx, c.Lease, []byte(`{}`), nil)
		require.NoError(t, err)
		b.call(t, "POST", "/threads/prune", `{"thread_ids":["`+tid1+`","`+tid2+`"],"strategy":"keep_latest"}`, http.StatusOK, &pruned)
		assert.Equal(t, map[string]int{"pruned_count": 1}, pruned)
		list, _, err := st.Checkpoints(ctx, tid1, "", 0, 10)
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, "k2", list[0].ID)
		b.call(t, "GET", "/threads/"+tid1, "", http.StatusOK, nil)
	})
}
