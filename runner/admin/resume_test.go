package admin_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner/admin"
)

// A parked node is shown WAITING with its request and answered through the
// API; a second resume returns the first answer; a node not waiting is a
// conflict; bad bodies are 400 naming what is wrong, and the node still
// waits.
func TestResumeThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true})
	ctx := context.Background()
	b.call(t, "POST", "/v1/runs", twoNodes, http.StatusCreated, nil)
	store := b.client.Store()
	c, err := store.Claim(ctx, fence.NodeRef{Thread: "rt-1", Run: "rt-1", Node: "a"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	p, err := store.Park(ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"ok?"}`)})
	require.NoError(t, err)

	var info fence.RunInfo
	b.call(t, "GET", "/v1/runs/rt-1", "", http.StatusOK, &info)
	require.Equal(t, "WAITING", info.Nodes[0].State)
	require.NotNil(t, info.Nodes[0].Wait)
	assert.Equal(t, p.WaitID, info.Nodes[0].Wait.ID)
	assert.JSONEq(t, `{"ask":"ok?"}`, string(info.Nodes[0].Wait.Request))

	e := b.errorBody(t, "POST", "/v1/runs/rt-1/nodes/a/resume", `{"value": nope}`, http.StatusBadRequest)
	assert.Contains(t, e.Error, "body")
	e = b.errorBody(t, "POST", "/v1/runs/rt-1/nodes/a/resume", `{"value": 1, "extra": 2}`, http.StatusBadRequest)
	assert.Contains(t, e.Error, "extra")
	b.errorBody(t, "POST", "/v1/runs/rt-1/nodes/b/resume", `{"value": 1}`, http.StatusConflict)
	b.errorBody(t, "POST", "/v1/runs/rt-1/nodes/a/resume", `{"value": 1, "wait_id": "other"}`, http.StatusConflict)
	b.errorBody(t, "POST", "/v1/runs/nope/nodes/a/resume", `{"value": 1}`, http.StatusNotFound)
	b.errorBody(t, "POST", "/v1/runs/rt-1/nodes/a%7B/resume", `{"value": 1}`, http.StatusBadRequest)
	b.errorBody(t, "GET", "/v1/runs/rt-1/nodes/a/resume", "", http.StatusMethodNotAllowed)
	b.call(t, "GET", "/v1/runs/rt-1", "", http.StatusOK, &info)
	require.Equal(t, "WAITING", info.Nodes[0].State, "still waiting")

	var out admin.ResumeBody
	b.call(t, "POST", "/v1/runs/rt-1/nodes/a/resume", `{"value": {"ok": true}}`, http.StatusOK, &out)
	assert.False(t, out.Already)
	assert.JSONEq(t, `{"ok": true}`, string(out.Answer.Value))
	b.call(t, "POST", "/v1/runs/rt-1/nodes/a/resume", `{"value": false, "wait_id": "`+p.WaitID+`"}`, http.StatusOK, &out)
	assert.True(t, out.Already)
	assert.JSONEq(t, `{"ok": true}`, string(out.Answer.Value), "the first answer stands")
	b.call(t, "GET", "/v1/runs/rt-1", "", http.StatusOK, &info)
	assert.Equal(t, "READY", info.Nodes[0].State)

	// A wait never answered, in a run cancelled since: 409.
	b.call(t, "POST", "/v1/runs", `{"id": "rt-2", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)
	c2, err := store.Claim(ctx, fence.NodeRef{Thread: "rt-2", Run: "rt-2", Node: "a"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Park(ctx, c2.Lease, fence.Wait{})
	require.NoError(t, err)
	b.call(t, "POST", "/v1/runs/rt-2/cancel", "", http.StatusOK, nil)
	b.errorBody(t, "POST", "/v1/runs/rt-2/nodes/a/resume", `{"value": 1}`, http.StatusConflict)

	// A wait answered by its timeout: a late resume gets that answer.
	b.call(t, "POST", "/v1/runs", `{"id": "rt-3", "nodes": [{"id": "a", "kind": "noop"}]}`, http.StatusCreated, nil)
	c3, err := store.Claim(ctx, fence.NodeRef{Thread: "rt-3", Run: "rt-3", Node: "a"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Park(ctx, c3.Lease, fence.Wait{Timeout: 50 * time.Millisecond, OnTimeout: "resume", Default: []byte(`"auto"`)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the sweeper's pass, once Redis's clock passed the timeout
		done, err := store.TimeOutWaits(ctx, "test", 10)
		return err == nil && len(done) > 0
	}, 10*time.Second, 10*time.Millisecond)
	b.call(t, "POST", "/v1/runs/rt-3/nodes/a/resume", `{"value": "late"}`, http.StatusOK, &out)
	assert.True(t, out.Already)
	assert.JSONEq(t, `"auto"`, string(out.Answer.Value), "the timeout's answer stands")
}
