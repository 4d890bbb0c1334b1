package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
)

// A run with start_in: 2s starts no node before 2 s have passed on Redis's
// clock: the node's started_at and the run's created_at are both Redis
// times.
func TestStartInDelaysTheRunOnRedisClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"rec": rec})
	id := b.submit(`{"id": "later-1", "start_in": "2s", "nodes": [{"id": "a", "kind": "rec"}, {"id": "b", "kind": "rec", "deps": ["a"]}]}`)

	info := b.waitRun(id, 15*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.NotNil(t, info.Nodes[0].StartedAt)
	require.GreaterOrEqual(t, info.Nodes[0].StartedAt.Sub(info.CreatedAt), 2*time.Second,
		"the root started %s after the submit", info.Nodes[0].StartedAt.Sub(info.CreatedAt))
	require.Equal(t, 1, rec.count("a"))

	// start_at in the past starts at once; both at once is refused.
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	id = b.submit(`{"id": "now-1", "start_at": "` + past + `", "nodes": [{"id": "a", "kind": "rec"}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(id, 10*time.Second).Status)
	_, err := runner.ParseSpec([]byte(`{"start_at": "` + past + `", "start_in": "1s", "nodes": [{"id": "a", "kind": "rec"}]}`))
	require.ErrorIs(t, err, runner.ErrInvalidSpec)
	require.ErrorContains(t, err, "start_at or start_in")
	at := time.Now().Add(-time.Hour)
	_, err = b.client.Submit(context.Background(), &runner.RunSpec{StartAt: &at, StartIn: runner.Duration(time.Second),
		Nodes: []runner.NodeSpec{{ID: "a", Kind: "rec"}}}) // a Run built in Go
	require.ErrorIs(t, err, runner.ErrInvalidSpec)
	require.ErrorContains(t, err, "start_at or start_in")
}

// A node's fixed retry backoff is used instead of the worker's exponential
// default: every gap between attempts is the base, without jitter.
func TestFixedRetryBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	var starts []time.Time
	failing := runner.KindFunc(func(_ context.Context, _ *runner.Task) (json.RawMessage, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return nil, errors.New("flaky")
	})
	cfg := b.fastConfig("w1")
	cfg.RetryBase, cfg.RetryMax = 5*time.Millisecond, 10*time.Millisecond // the default would be quick
	b.worker(cfg, map[string]runner.Kind{"flaky": failing})
	id := b.submit(`{"id": "fixed-1", "nodes": [{"id": "a", "kind": "flaky", "max_attempts": 3,
		"retry": {"backoff": "fixed", "base": "600ms", "jitter": false}}]}`)
	info := b.waitRun(id, 15*time.Second)
	require.Equal(t, "FAILED", info.Status)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, starts, 3)
	for i := 1; i < len(starts); i++ {
		gap := starts[i].Sub(starts[i-1])
		require.GreaterOrEqual(t, gap, 550*time.Millisecond, "gap %d: %s", i, gap)
		require.Less(t, gap, 3*time.Second, "gap %d: %s", i, gap)
	}
}
