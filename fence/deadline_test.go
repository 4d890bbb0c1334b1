package fence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// A run's timeout cancels what is left of it once it has passed on
// Redis's clock, and nothing before; a run that ended in time is left
// alone. On a real redis-server.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := New(rdb, nil)
	ctx := t.Context()
	chain := []NodeSpec{
		{ID: "a", Input: "null", Deps: []string{}, Dependents: []string{"b"}, Descendants: []string{"b"}, MaxAttempts: 1},
		{ID: "b", Input: "null", Deps: []string{"a"}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1},
	}
	_, err := s.Submit(ctx, SubmitArgs{Run: "slow", Digest: "d", Nodes: chain, Timeout: 300 * time.Millisecond, TimeoutLabel: "300ms"})
	require.NoError(t, err)
	_, err = s.Submit(ctx, SubmitArgs{Run: "quick", Digest: "d", Nodes: chain[:1:1], Timeout: 300 * time.Millisecond, TimeoutLabel: "300ms"})
	require.NoError(t, err)
	_, err = s.Submit(ctx, SubmitArgs{Run: "quick", Digest: "d", Nodes: chain[:1:1], Timeout: 300 * time.Millisecond, TimeoutLabel: "300ms"})
	require.NoError(t, err, "a submit retried arms the same deadline again")
	a, err := s.Claim(ctx, NodeRef{Thread: "slow", Run: "slow", Node: "a"}, "w", time.Minute, time.Second)
	require.NoError(t, err)
	q, err := s.Claim(ctx, NodeRef{Thread: "quick", Run: "quick", Node: "a"}, "w", time.Minute, time.Second)
	require.NoError(t, err)
	_, err = s.Commit(ctx, q.Lease, []byte(`1`), nil)
	require.NoError(t, err)

	out, err := s.TimeOutRuns(ctx, "sweeper", 10)
	require.NoError(t, err)
	assert.Empty(t, out, "nothing is due before its deadline")

	var timedOut []TimedOutRun
	for deadline := time.Now().Add(10 * time.Second); len(timedOut) == 0; { // polling Redis's clock past the deadline
		timedOut, err = s.TimeOutRuns(ctx, "sweeper", 10)
		require.NoError(t, err)
		require.True(t, time.Now().Before(deadline), "the timeout never fired")
	}
	assert.Equal(t, []TimedOutRun{{Run: "slow", Thread: "slow", Status: "RUNNING", Running: 1}}, timedOut)
	info, err := s.GetRun(ctx, "slow")
	require.NoError(t, err)
	assert.True(t, info.Cancelled)
	assert.Equal(t, "timeout 300ms passed", info.CancelReason)
	assert.Equal(t, "CANCELLED", info.Nodes[1].State, "what had not started is cancelled at once")
	assert.Equal(t, "RUNNING", info.Nodes[0].State, "a running node is told and stops at a safe point")
	_, err = s.Release(ctx, a.Lease, "stopped")
	require.NoError(t, err)
	info, err = s.GetRun(ctx, "slow")
	require.NoError(t, err)
	assert.Equal(t, "CANCELLED", info.Status)

	quick, err := s.GetRun(ctx, "quick")
	require.NoError(t, err)
	assert.Equal(t, "SUCCEEDED", quick.Status, "a run that ended in time is not touched")
	// quick's deadline, a few ms after slow's, leaves the index at the
	// first pass past it, with nothing cancelled.
	for deadline := time.Now().Add(10 * time.Second); ; {
		more, err := s.TimeOutRuns(ctx, "sweeper", 10)
		require.NoError(t, err)
		assert.Empty(t, more, "a run that ended in time is not cancelled")
		left := int64(0)
		for i := range Shards {
			n, err := rdb.ZCard(ctx, s.keys.Deadlines(i)).Result()
			require.NoError(t, err)
			left += n
		}
		if left == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d deadlines never left their index", left)
	}
}
