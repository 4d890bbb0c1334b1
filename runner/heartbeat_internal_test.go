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
	h := &heartbeater{ttl: ttl, interval: ttl / 3, leases: map[string]*active{},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), m: NewMetrics(nil)}
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
