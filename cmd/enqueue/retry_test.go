package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A FAILED run retried through the CLI re-runs only its failed and
// cancelled nodes and SUCCEEDS; a write from the failed attempt is refused
// after the retry; the same request again, or another once it runs, is
// answered as success; a SUCCEEDED run is refused.
func TestRetryAFailedRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.submit(t, `{"id": "re-1", "nodes": [{"id": "a", "kind": "noop"},
		{"id": "b", "kind": "noop", "deps": ["a"], "max_attempts": 1},
		{"id": "c", "kind": "noop", "deps": ["b"]}]}`)
	store := b.client.Store()
	ref := func(n string) fence.NodeRef { return fence.NodeRef{Thread: run, Run: run, Node: n} }
	a, err := store.Claim(ctx, ref("a"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Commit(ctx, a.Lease, []byte(`{"a":1}`), a.Dependents)
	require.NoError(t, err)
	failed, err := store.Claim(ctx, ref("b"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Fail(ctx, failed.Lease, fence.Failure{Err: "boom"}, failed.Descendants)
	require.NoError(t, err)
	require.Equal(t, "FAILED", b.status(t, run).Status)

	r := b.run(t, "", "retry", run, "--id", "req-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "RUNNING\n", r.stdout)
	require.Contains(t, r.stderr, "1 node(s) ready")
	require.Equal(t, map[string]string{"a": "SUCCEEDED", "b": "READY", "c": "BLOCKED"}, states(b.status(t, run)))

	// The failed attempt's late write is refused.
	_, err = store.Commit(ctx, failed.Lease, []byte(`{"late":true}`), failed.Dependents)
	require.ErrorIs(t, err, fence.ErrStaleEpoch)

	r = b.run(t, "", "retry", run, "--id", "req-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "retried by this request already")
	r = b.run(t, "", "retry", run)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "already running")

	b.finish(t, run)
	s := b.status(t, run)
	require.Equal(t, "SUCCEEDED", s.Status)
	require.JSONEq(t, `{"a":1}`, string(s.Nodes[0].Result), "a kept its result")
	r = b.run(t, "", "events", run, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, `"type":"claimed","node":"a"`), "a ran once")
	require.Contains(t, r.stdout, `"type":"stale_rejected","node":"b"`)
	require.Contains(t, r.stdout, `"type":"run_retried"`)

	r = b.run(t, "", "retry", run)
	require.Equal(t, 1, r.code)
	require.Equal(t, "enqueue: run "+run+" is SUCCEEDED; only a FAILED or CANCELLED run can be retried\n", r.stderr)
	r = b.run(t, "", "retry", "nope")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
}
