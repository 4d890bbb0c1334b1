package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// A thread's runs and checkpoints, as a worker saved them, read through the
// API with the token /v1/runs needs: the thread, one namespace's history
// newest first in pages, and the errors a caller can make.
func TestThreadAndCheckpointReads(t *testing.T) {
	t.Parallel()
	const token = "threads-token-0123456789"
	b := setup(t, options{real: true, token: token})
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.rdb, PollInterval: 10 * time.Millisecond, Logger: testLogger(t)})
	require.NoError(t, err)
	w.Register("agent", runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		for i := 1; i <= 5; i++ {
			if _, err := task.SaveCheckpoint(ctx, "agent", json.RawMessage(fmt.Sprintf(`{"step": %d}`, i))); err != nil {
				return nil, err
			}
		}
		_, err := task.SaveCheckpoint(ctx, "", map[string]string{"root": "yes"})
		return nil, err
	}))
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Shutdown)

	b.call(t, "POST", "/v1/runs", `{"id": "talk-1", "thread": "conv", "nodes": [{"id": "a", "kind": "agent"}]}`, http.StatusCreated, nil)
	var th fence.ThreadInfo
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, raw := send(t, b.request(t, "GET", "/v1/threads/conv", ""))
		require.Equal(c, http.StatusOK, resp.StatusCode, "%s", raw)
		require.NoError(c, json.Unmarshal(raw, &th))
		assert.Equal(c, "SUCCEEDED", th.ActiveStatus)
	}, 10*time.Second, 10*time.Millisecond, "polling the thread: the user-visible signal")
	assert.Equal(t, fence.ThreadInfo{Thread: "conv", Active: "talk-1", ActiveStatus: "SUCCEEDED", Queued: []string{},
		Checkpoints: map[string]int64{"agent": 5, "": 1}}, th)

	// Two pages of two, then the last one; data is the JSON saved.
	var page admin.CheckpointsBody
	var steps []string
	path := "/v1/threads/conv/checkpoints?ns=agent&limit=2"
	for range 3 {
		page = admin.CheckpointsBody{}
		b.call(t, "GET", path, "", http.StatusOK, &page)
		for _, cp := range page.Checkpoints {
			steps = append(steps, fmt.Sprintf("v%d=%s", cp.Version, cp.Data))
			assert.Equal(t, "talk-1", cp.Run)
			assert.Equal(t, "a", cp.Node)
			assert.Equal(t, int64(1), cp.Epoch)
			assert.Equal(t, "conv", cp.Thread)
		}
		path = "/v1/threads/conv/checkpoints?ns=agent&limit=2&cursor=" + page.Next
	}
	assert.Equal(t, []string{`v5={"step":5}`, `v4={"step":4}`, `v3={"step":3}`, `v2={"step":2}`, `v1={"step":1}`}, steps)
	assert.Empty(t, page.Next, "the last page has no next")

	// Without ns, as the CLI: the only namespace, or a 400 naming them.
	e := b.errorBody(t, "GET", "/v1/threads/conv/checkpoints", "", http.StatusBadRequest)
	assert.Contains(t, e.Error, `2 namespaces ("", "agent")`)
	b.call(t, "GET", "/v1/threads/conv/checkpoints?ns=", "", http.StatusOK, &page) // ns= is the root namespace
	require.Len(t, page.Checkpoints, 1)
	assert.JSONEq(t, `{"root":"yes"}`, string(page.Checkpoints[0].Data))
	b.call(t, "GET", "/v1/threads/conv/checkpoints?ns=other", "", http.StatusOK, &page)
	assert.Empty(t, page.Checkpoints, "a known thread with nothing in ns is an empty list")

	for _, tc := range []struct {
		path string
		want int
		says string
	}{
		{"/v1/threads/nope", 404, "not found"},
		{"/v1/threads/nope/checkpoints?ns=agent", 404, "not found"},
		{"/v1/threads/bad%7Bid", 400, "path.thread: 'bad{id' is not allowed (allowed: A-Z a-z 0-9 . _ -, and not only dots)"},
		{"/v1/threads/bad%7Bid/checkpoints", 400, "path.thread: 'bad{id' is not allowed (allowed: A-Z a-z 0-9 . _ -, and not only dots)"},
		{"/v1/threads/conv/checkpoints?ns=a%20b", 400, `query.ns: 'a b' is not allowed (allowed: A-Z a-z 0-9 . _ : | -)`},
		{"/v1/threads/conv/checkpoints?cursor=soon", 400, "cursor"},
		{"/v1/threads/conv/checkpoints?limit=0", 400, "limit"},
	} {
		e := b.errorBody(t, "GET", tc.path, "", tc.want)
		assert.Contains(t, e.Error, tc.says, tc.path)
	}
	resp := b.call(t, "DELETE", "/v1/threads/conv/checkpoints", "", http.StatusMethodNotAllowed, &admin.ErrorBody{})
	assert.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))

	for _, path := range []string{"/v1/threads/conv", "/v1/threads/conv/checkpoints?ns=agent"} {
		req := b.request(t, "GET", path, "")
		req.Header.Del("Authorization")
		resp, _ := send(t, req)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "GET %s needs the token", path)
	}
}

// The client reads the same thread the API serves.
func TestClientReadsThreads(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	_, err := b.client.Thread(context.Background(), "nobody")
	require.ErrorIs(t, err, fence.ErrNotFound)
	_, err = b.client.LatestCheckpoint(context.Background(), "nobody", "")
	require.ErrorIs(t, err, fence.ErrNoCheckpoint)
	_, _, err = b.client.Checkpoints(context.Background(), "bad{", "", 0, 10)
	require.ErrorIs(t, err, fence.ErrInvalidID)
}
