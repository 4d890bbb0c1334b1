package fence_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// TestCancel: waiting nodes stop at once, a running one at its next
// heartbeat, and the run ends CANCELLED when its last node does.
func TestCancel(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("can", node("a"), node("b", "a"), node("c")))
		a := tb.claim(t, "can", "a", "w", longTTL)

		res, err := tb.store.Cancel(tb.ctx, "can", "user asked", "alice")
		require.NoError(t, err)
		require.False(t, res.Already)
		require.Equal(t, 1, res.Running)
		require.Equal(t, "RUNNING", res.RunStatus, "a is still running")
		require.Equal(t, map[string]string{"a": "RUNNING", "b": "CANCELLED", "c": "CANCELLED"}, tb.states(t, "can"))
		run := tb.getRun(t, "can")
		require.True(t, run.Cancelled)
		require.Equal(t, "user asked", run.CancelReason)

		_, err = tb.store.Claim(tb.ctx, ref("can", "c"), "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeDone)

		r, err := tb.store.Heartbeat(tb.ctx, a.Lease, longTTL, 40)
		require.NoError(t, err)
		require.True(t, r.Cancelled, "the owner learns of the cancel from its heartbeat")

		end, err := tb.store.Fail(tb.ctx, a.Lease, fence.Failure{Err: "stopped: run cancelled"}, a.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Cancelled, end.Outcome)
		require.Equal(t, "CANCELLED", end.RunStatus)
		require.Equal(t, map[string]string{"a": "CANCELLED", "b": "CANCELLED", "c": "CANCELLED"}, tb.states(t, "can"))
		run = tb.getRun(t, "can")
		require.Equal(t, "CANCELLED", run.Status)
		require.NotNil(t, run.FinishedAt)

		res, err = tb.store.Cancel(tb.ctx, "can", "again", "bob")
		require.NoError(t, err)
		require.True(t, res.Already)
		require.Equal(t, "CANCELLED", res.RunStatus)
		require.Equal(t, 0, res.Running)

		evs := tb.events(t, "can")
		require.Len(t, ofType(evs, "cancel_requested"), 1, "a second cancel records nothing")
		require.Len(t, ofType(evs, "cancelled"), 3)
		fin := ofType(evs, "run_finished")
		require.Len(t, fin, 1)
		require.Equal(t, "CANCELLED", fin[0].Details["status"])
	})
}

// TestCancelRunningRelease: a running node released after a cancel ends
// CANCELLED instead of READY; one that commits keeps its result but readies
// nothing.
func TestCancelRunningRelease(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("canrel", node("a"), node("b"), node("c", "b")))
		a := tb.claim(t, "canrel", "a", "w", longTTL)
		b := tb.claim(t, "canrel", "b", "w", longTTL)
		res, err := tb.store.Cancel(tb.ctx, "canrel", "stop", "alice")
		require.NoError(t, err)
		require.Equal(t, 2, res.Running)
		require.Equal(t, "CANCELLED", tb.nodeInfo(t, "canrel", "c").State)

		end, err := tb.store.Release(tb.ctx, a.Lease, "shutdown")
		require.NoError(t, err)
		require.Equal(t, fence.Cancelled, end.Outcome)
		require.Equal(t, "RUNNING", end.RunStatus)
		got, err := tb.store.Commit(tb.ctx, b.Lease, []byte(`"b"`), b.Dependents)
		require.NoError(t, err, "work that finished is kept")
		require.Empty(t, got.Ready, "a cancelled run hands out no new work")
		require.Equal(t, "CANCELLED", got.RunStatus)
		require.Equal(t, map[string]string{"a": "CANCELLED", "b": "SUCCEEDED", "c": "CANCELLED"}, tb.states(t, "canrel"))
		require.Equal(t, "CANCELLED", tb.getRun(t, "canrel").Status)
	})
}

// TestCancelExpiredOwner: a running node whose owner died after the run was
// cancelled is not taken over; Expire ends it CANCELLED.
func TestCancelExpiredOwner(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("cx", node("a"), node("b", "a")))
		a := tb.claim(t, "cx", "a", "worker-a", shortTTL)
		_, err := tb.store.Cancel(tb.ctx, "cx", "stop", "alice")
		require.NoError(t, err)
		tb.advance(t, pastExpiry)

		_, err = tb.store.Claim(tb.ctx, ref("cx", "a"), "worker-b", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrRunCancelled)
		var ee *fence.ExpiredError
		require.True(t, errors.As(err, &ee))
		require.Equal(t, a.Epoch, ee.Lease.Epoch)
		require.Equal(t, "worker-a", ee.Lease.Owner)
		require.Equal(t, "RUNNING", tb.nodeInfo(t, "cx", "a").State)

		end, err := tb.store.Expire(tb.ctx, ee, "sweeper", grace)
		require.NoError(t, err)
		require.Equal(t, fence.Cancelled, end.Outcome)
		require.Equal(t, "CANCELLED", end.RunStatus)
		require.Equal(t, map[string]string{"a": "CANCELLED", "b": "CANCELLED"}, tb.states(t, "cx"))
		require.Equal(t, "CANCELLED", tb.getRun(t, "cx").Status)
	})
}

// TestCancelFinishedRun: a finished run cannot be cancelled; an unknown one
// is not found.
func TestCancelFinishedRun(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("fin", node("n")))
		tb.commit(t, tb.claim(t, "fin", "n", "w", longTTL), `0`)
		_, err := tb.store.Cancel(tb.ctx, "fin", "too late", "alice")
		require.ErrorIs(t, err, fence.ErrRunDone)
		run := tb.getRun(t, "fin")
		require.Equal(t, "SUCCEEDED", run.Status)
		require.False(t, run.Cancelled)

		_, err = tb.store.Cancel(tb.ctx, "nope", "", "alice")
		require.ErrorIs(t, err, fence.ErrNotFound)
	})
}
