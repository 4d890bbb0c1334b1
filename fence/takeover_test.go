package fence_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// takeover lets worker-a's short lease on run/n expire and worker-b take
// the node over. It returns both claims.
func (tb *testBundle) takeover(t *testing.T, run string) (old, cur *fence.Claimed) {
	t.Helper()
	tb.submit(t, spec(run, node("n")))
	old = tb.claim(t, run, "n", "worker-a", shortTTL)
	_, err := tb.store.Claim(tb.ctx, ref(run, "n"), "worker-b", longTTL, grace)
	require.ErrorIs(t, err, fence.ErrNodeBusy, "the lease is live")

	tb.advance(t, pastExpiry) // worker-a stops heartbeating
	// Expired, but not past a grace longer than the wait: still busy.
	_, err = tb.store.Claim(tb.ctx, ref(run, "n"), "worker-b", longTTL, time.Minute)
	require.ErrorIs(t, err, fence.ErrNodeBusy, "within the grace")
	cur = tb.claim(t, run, "n", "worker-b", longTTL)
	return old, cur
}

// TestTakeoverAfterLeaseExpiry: an owner that stops heartbeating loses the
// node on Redis time; the next claim takes it over with epoch+1 and
// attempt+1, and the event stream says who lost it.
func TestTakeoverAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		old, cur := tb.takeover(t, "tko")
		require.Equal(t, old.Epoch+1, cur.Epoch)
		require.Equal(t, old.Attempt+1, cur.Attempt)
		require.Equal(t, "worker-a", cur.PrevOwner)
		require.NotEqual(t, old.ClaimID, cur.ClaimID)

		n := tb.nodeInfo(t, "tko", "n")
		require.Equal(t, "RUNNING", n.State)
		require.Equal(t, "worker-b", n.Owner)
		require.Equal(t, cur.Epoch, n.Epoch)

		evs := tb.events(t, "tko")
		lost, took := indexOf(evs, "heartbeat_lost"), indexOf(evs, "takeover")
		require.GreaterOrEqual(t, lost, 0, "heartbeat_lost recorded")
		require.GreaterOrEqual(t, took, 0, "takeover recorded")
		require.Less(t, lost, took, "heartbeat_lost precedes takeover")
		require.Equal(t, "worker-a", evs[lost].Worker)
		require.Equal(t, old.Epoch, evs[lost].Epoch)
		// When the lost lease ran out, and how long before the takeover.
		require.Equal(t, strconv.FormatInt(old.Until.UnixMilli(), 10), evs[lost].Details["lease_until"])
		overdue, err := strconv.ParseInt(evs[lost].Details["overdue_ms"], 10, 64)
		require.NoError(t, err, "overdue_ms %q", evs[lost].Details["overdue_ms"])
		require.Greater(t, overdue, grace.Milliseconds(), "taken over only past the grace")
		require.Equal(t, "worker-b", evs[took].Worker)
		require.Equal(t, cur.Epoch, evs[took].Epoch)
		require.Equal(t, "worker-a", evs[took].Details["prev_owner"])
		require.Equal(t, "1", evs[took].Details["prev_epoch"])
		require.Len(t, ofType(evs, "takeover"), 1)
	})
}

// TestStaleOwnerIsFenced: the paused owner wakes up and writes with its old
// lease. Every write is refused, recorded, and leaves the new owner's state.
func TestStaleOwnerIsFenced(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		old, cur := tb.takeover(t, "stale")
		_, err := tb.store.Heartbeat(tb.ctx, cur.Lease, longTTL, 70)
		require.NoError(t, err)

		requireStale := func(err error) {
			t.Helper()
			require.ErrorIs(t, err, fence.ErrStaleEpoch)
			require.True(t, fence.IsFenced(err))
		}
		staleWrites := func() {
			t.Helper()
			_, err := tb.store.Commit(tb.ctx, old.Lease, []byte(`"old"`), old.Dependents)
			requireStale(err)
			_, err = tb.store.Heartbeat(tb.ctx, old.Lease, longTTL, 10)
			requireStale(err)
			_, err = tb.store.Fail(tb.ctx, old.Lease, fence.Failure{Err: "old failed", Final: true}, old.Descendants)
			requireStale(err)
			_, err = tb.store.Release(tb.ctx, old.Lease, "old releases")
			requireStale(err)
		}

		staleWrites() // while the new owner runs
		n := tb.nodeInfo(t, "stale", "n")
		require.Equal(t, "RUNNING", n.State)
		require.Equal(t, "worker-b", n.Owner)
		require.Equal(t, cur.Epoch, n.Epoch)
		require.Equal(t, 70, n.Progress)
		require.Empty(t, n.Error)

		tb.commit(t, cur, `{"by":"b"}`)
		staleWrites() // and after it committed
		n = tb.nodeInfo(t, "stale", "n")
		require.Equal(t, "SUCCEEDED", n.State)
		require.JSONEq(t, `{"by":"b"}`, string(n.Result))
		require.Equal(t, 100, n.Progress, "a commit completes the progress; the stale beat's 10 is never stored")
		require.Empty(t, n.Error)
		require.Equal(t, "SUCCEEDED", tb.getRun(t, "stale").Status)

		evs := tb.events(t, "stale")
		ops := map[string]int{}
		for _, e := range ofType(evs, "stale_rejected") {
			require.Equal(t, "worker-a", e.Worker)
			require.Equal(t, old.Epoch, e.Epoch)
			require.Equal(t, "2", e.Details["current_epoch"])
			ops[e.Details["op"]]++
		}
		require.Equal(t, map[string]int{"commit": 2, "heartbeat": 2, "fail": 2, "release": 2}, ops)
		require.Len(t, ofType(evs, "committed"), 1)
		require.Empty(t, ofType(evs, "failed"))
		require.Empty(t, ofType(evs, "released"))
		for _, e := range ofType(evs, "progress") {
			require.Equal(t, "worker-b", e.Worker, "no progress event from the stale owner")
		}
	})
}

// TestExpiryWithoutAttemptsLeft: the owner of the last attempt dies. The
// next claim must not take the node over; Expire fails it instead, unless
// the owner came back and renewed its lease first.
func TestExpiryWithoutAttemptsLeft(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		expired := func(t *testing.T, run string) (*fence.Claimed, *fence.ExpiredError) {
			t.Helper()
			tb.submit(t, spec(run, node("n").attempts(1), node("m", "n"), node("k", "m")))
			c := tb.claim(t, run, "n", "worker-a", shortTTL)
			tb.advance(t, pastExpiry)
			_, err := tb.store.Claim(tb.ctx, ref(run, "n"), "worker-b", longTTL, grace)
			require.ErrorIs(t, err, fence.ErrAttemptsExhausted)
			var ee *fence.ExpiredError
			require.True(t, errors.As(err, &ee))
			require.Equal(t, "worker-a", ee.Lease.Owner)
			require.Equal(t, c.Epoch, ee.Lease.Epoch)
			require.Equal(t, c.ClaimID, ee.Lease.ClaimID)
			require.Equal(t, []string{"m", "k"}, ee.Descendants)
			n := tb.nodeInfo(t, run, "n")
			require.Equal(t, "RUNNING", n.State, "a refused claim changes nothing")
			require.Equal(t, c.Epoch, n.Epoch)
			return c, ee
		}

		t.Run("expire fails the node", func(t *testing.T) {
			_, ee := expired(t, "exp1")
			end, err := tb.store.Expire(tb.ctx, ee, "sweeper", grace)
			require.NoError(t, err)
			require.Equal(t, fence.Failed, end.Outcome)
			require.Equal(t, "FAILED", end.RunStatus)
			require.Equal(t, map[string]string{"n": "FAILED", "m": "CANCELLED", "k": "CANCELLED"}, tb.states(t, "exp1"))
			require.Contains(t, tb.nodeInfo(t, "exp1", "n").Error, "worker-a")
			require.Equal(t, "FAILED", tb.getRun(t, "exp1").Status)

			again, err := tb.store.Expire(tb.ctx, ee, "sweeper", grace)
			require.NoError(t, err, "a second expire (a retry) answers as the first")
			require.Equal(t, end, again)
			require.Len(t, ofType(tb.events(t, "exp1"), "run_finished"), 1, "and changes nothing")
			_, err = tb.store.Claim(tb.ctx, ref("exp1", "n"), "worker-b", longTTL, grace)
			require.ErrorIs(t, err, fence.ErrNodeDone)
		})

		t.Run("a late heartbeat wins", func(t *testing.T) {
			c, ee := expired(t, "exp2")
			_, err := tb.store.Heartbeat(tb.ctx, c.Lease, longTTL, 50)
			require.NoError(t, err, "the owner was only paused; nobody took over")
			_, err = tb.store.Expire(tb.ctx, ee, "sweeper", grace)
			require.ErrorIs(t, err, fence.ErrLeaseActive)
			n := tb.nodeInfo(t, "exp2", "n")
			require.Equal(t, "RUNNING", n.State)
			require.Equal(t, "worker-a", n.Owner)
			require.Equal(t, c.Epoch, n.Epoch)
			_, err = tb.store.Claim(tb.ctx, ref("exp2", "n"), "worker-b", longTTL, grace)
			require.ErrorIs(t, err, fence.ErrNodeBusy)
			tb.commit(t, c, `"late but fine"`)
			require.Equal(t, "SUCCEEDED", tb.nodeInfo(t, "exp2", "n").State)
		})
	})
}
