package runner

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A worker can hold two claims of one node: it took its own node over
// after a partition healed while the old handler still ran. Ending the old
// attempt must leave the new one's self-fence armed, so the new handler is
// still cancelled with ErrLeaseLost when its renewals stop.
func TestEndingAnOldAttemptKeepsTheNewOneFenced(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	h := newHeartbeater(heartbeaterParams{ttl: ttl, interval: ttl / 3,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: NewMetrics(nil)})
	node := fence.Lease{Thread: "r", Run: "r", Node: "n", Owner: "w"}
	oldLease, newLease := node, node
	oldLease.Epoch, oldLease.ClaimID = 1, "old"
	newLease.Epoch, newLease.ClaimID = 2, "new"

	oldCtx, oldCancel := context.WithCancelCause(context.Background())
	defer oldCancel(nil)
	old := h.add(oldLease, NewTask(oldLease, "k", nil, 0), time.Now(), oldCancel)
	newCtx, newCancel := context.WithCancelCause(context.Background())
	defer newCancel(nil)
	claimed := time.Now()
	h.add(newLease, NewTask(newLease, "k", nil, 0), claimed, newCancel)

	require.False(t, h.finish(old), "the old attempt ends")
	select {
	case <-newCtx.Done():
		require.ErrorIs(t, context.Cause(newCtx), ErrLeaseLost)
		require.GreaterOrEqual(t, time.Since(claimed), ttl-h.margin(), "not before the lease stops being trusted")
	case <-time.After(3 * ttl):
		t.Fatal("the new attempt was never fenced: ending the old one stopped its timer")
	}
	require.NoError(t, context.Cause(oldCtx), "a finished attempt is not cancelled")
	require.Equal(t, 1, h.count())
}

// A cancel can be pushed between a node's claim and the moment its attempt
// is tracked: the attempt is cancelled as it starts. An attempt of a later
// run that reuses the run id (another incarnation) is left alone.
func TestACancelPushedBeforeTheAttemptIsTrackedStillStopsIt(t *testing.T) {
	t.Parallel()
	h := newHeartbeater(heartbeaterParams{ttl: time.Minute, interval: 20 * time.Second,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: NewMetrics(nil)})
	l := fence.Lease{Thread: "r", Run: "r", Incarnation: "i1", Node: "n", Owner: "w", Epoch: 1, ClaimID: "c1"}
	claimStarted := time.Now().Add(-time.Millisecond)
	require.Zero(t, h.cancelRun(fence.CancelMessage{Run: "r", Incarnation: "i1"}), "nothing was tracked yet")

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	h.add(l, NewTask(l, "k", nil, 0), claimStarted, cancel)
	require.ErrorIs(t, context.Cause(ctx), ErrRunCancelled)

	// An attempt claimed after the push heard (the run retried since) is
	// left alone: Redis ran its claim after the cancel.
	retried := l
	retried.Epoch, retried.ClaimID = 2, "c3"
	ctx3, cancel3 := context.WithCancelCause(context.Background())
	defer cancel3(nil)
	h.add(retried, NewTask(retried, "k", nil, 0), time.Now().Add(time.Millisecond), cancel3)
	require.NoError(t, context.Cause(ctx3), "claimed after the push")

	later := l
	later.Incarnation, later.ClaimID = "i2", "c2"
	ctx2, cancel2 := context.WithCancelCause(context.Background())
	defer cancel2(nil)
	h.add(later, NewTask(later, "k", nil, 0), time.Now(), cancel2)
	require.NoError(t, context.Cause(ctx2), "a later run that reuses the id is not the cancelled one")

	require.Equal(t, 1, h.cancelRun(fence.CancelMessage{Run: "r", Incarnation: "i2"}))
	require.ErrorIs(t, context.Cause(ctx2), ErrRunCancelled)
}

// An attempt that self-fenced and then has a late renewal refused is still
// one that stopped trusting its lease: the worker gives its node back, and
// the handler is cancelled once.
func TestSelfFencedStaysSelfFenced(t *testing.T) {
	t.Parallel()
	h := &heartbeater{ttl: time.Minute, interval: time.Second, leases: map[string]*active{},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), m: NewMetrics(nil)}
	l := fence.Lease{Thread: "r", Run: "r", Node: "n", Owner: "w", Epoch: 1, ClaimID: "c"}
	cancels := 0
	a := h.add(l, NewTask(l, "k", nil, 0), time.Now(), func(error) { cancels++ })
	h.lost(a, selfFencedReason)
	h.lost(a, "fence: stale epoch")
	require.True(t, h.wasSelfFenced(a))
	require.True(t, h.finish(a))
	require.Equal(t, 1, cancels)
}
