package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner/admin"
)

// GET /v1/workers lists the live runners; a run whose kind none of them
// serves is accepted with a warning, and its READY node says why it waits.
func TestWorkersAndUnservedRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true})
	var list admin.WorkersBody
	b.call(t, "GET", "/v1/workers", "", http.StatusOK, &list)
	require.Empty(t, list.Workers)

	w := fence.WorkerInfo{ID: "r1", Kinds: []string{"exec", "noop"}, Queues: []string{"default"}, SeenAt: time.Now()}
	require.NoError(t, b.client.Store().Advertise(t.Context(), w, time.Minute))
	b.call(t, "GET", "/v1/workers", "", http.StatusOK, &list)
	require.Len(t, list.Workers, 1)
	require.Equal(t, "r1", list.Workers[0].ID)
	require.Equal(t, []string{"exec", "noop"}, list.Workers[0].Kinds)

	var sub admin.SubmitBody
	b.call(t, "POST", "/v1/runs", `{"id":"u","nodes":[{"id":"a","kind":"noop"},{"id":"s","kind":"summarize"}]}`,
		http.StatusCreated, &sub)
	require.Equal(t, []string{"no runner serves kind summarize on queue default"}, sub.Warnings)
	var info fence.RunInfo
	b.call(t, "GET", "/v1/runs/u", "", http.StatusOK, &info)
	require.Empty(t, info.Nodes[0].Waiting, "noop is served")
	require.Equal(t, "waiting: no runner serves kind summarize on queue default", info.Nodes[1].Waiting)

	// require_served=true refuses such a run, storing nothing, naming the
	// node's field and the kind meant.
	var refused admin.ErrorBody
	b.call(t, "POST", "/v1/runs?require_served=true", `{"id":"u2","nodes":[{"id":"a","kind":"noop"},{"id":"s","kind":"exce"}]}`,
		http.StatusBadRequest, &refused)
	require.Equal(t, []admin.Problem{{Field: "nodes[1].kind",
		Message: "no runner serves kind exce on queue default (did you mean exec?); nothing stored"}}, refused.Problems)
	b.call(t, "GET", "/v1/runs/u2", "", http.StatusNotFound, nil)
	b.call(t, "POST", "/v1/runs?require_served=maybe", `{"id":"u2","nodes":[{"id":"a","kind":"noop"}]}`, http.StatusBadRequest, &refused)
	require.Contains(t, refused.Error, `require_served "maybe"`)
	var served admin.SubmitBody
	b.call(t, "POST", "/v1/runs?require_served=true", `{"id":"u2","nodes":[{"id":"a","kind":"noop"}]}`, http.StatusCreated, &served)
	require.Empty(t, served.Warnings)

	require.NoError(t, b.client.Store().Withdraw(t.Context(), "r1"))
	b.call(t, "GET", "/v1/workers", "", http.StatusOK, &list)
	require.Empty(t, list.Workers)
}
