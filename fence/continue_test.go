package fence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// serveAll continues any noop node on the default queue, under a new
// continuation claim id each call.
func serveAll() fence.Continue {
	return fence.Continue{ClaimID: fence.NewClaimID(), TTL: longTTL, Queues: []string{"default"}, Kinds: []string{"noop"}}
}

// A commit can claim the next node of a chain for its caller in the same
// step: the successor is RUNNING under a new epoch and claim id, never
// enqueued, and fenced like any claim.
func TestCommitContinuesAChain(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("chain", node("a"), node("b", "a"), node("c", "b")))
		a := tb.claim(t, "chain", "a", "w", longTTL)
		res, err := tb.store.CommitContinue(tb.ctx, a.Lease, []byte(`1`), a.Dependents, serveAll())
		require.NoError(t, err)
		require.Empty(t, res.Ready, "the successor is not enqueued")
		require.NotNil(t, res.Next)
		b := res.Next
		require.Equal(t, "b", b.Node)
		require.Equal(t, int64(1), b.Epoch)
		require.Equal(t, int64(1), b.Attempt)
		require.Equal(t, "w", b.Owner)
		require.Equal(t, []string{"c"}, b.Dependents)
		require.NotEqual(t, a.ClaimID, b.ClaimID)

		n := tb.nodeInfo(t, "chain", "b")
		require.Equal(t, "RUNNING", n.State)
		require.Equal(t, "w", n.Owner)
		_, err = tb.store.Claim(tb.ctx, ref("chain", "b"), "other", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeBusy, "the continuation holds a real lease")
		sw, err := tb.store.Sweep(tb.ctx, fence.SweepOptions{Grace: grace, Threshold: 0, Limit: 10, Retry: longTTL})
		require.NoError(t, err)
		require.Empty(t, sw.Ready, "a continued node is not left in the ready index")

		// Its lease is fenced like any other: a heartbeat renews it, and a
		// commit with it goes on to c.
		_, err = tb.store.Heartbeat(tb.ctx, b.Lease, longTTL, 50)
		require.NoError(t, err)
		res, err = tb.store.CommitContinue(tb.ctx, b.Lease, []byte(`2`), b.Dependents, serveAll())
		require.NoError(t, err)
		require.Equal(t, "c", res.Next.Node)
		res, err = tb.store.CommitContinue(tb.ctx, res.Next.Lease, []byte(`3`), res.Next.Dependents, serveAll())
		require.NoError(t, err)
		require.Nil(t, res.Next)
		require.Equal(t, "SUCCEEDED", res.RunStatus)
		require.Len(t, ofType(tb.events(t, "chain"), "claimed"), 3)
	})
}

// Only a dependent the caller can run is continued; the others are
// enqueued as usual, and so is everything when the run was cancelled.
func TestContinuationOnlyForWhatTheCallerServes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("fan", node("a"), node("b", "a"), node("c", "a"), node("d", "a")))
		a := tb.claim(t, "fan", "a", "w", longTTL)
		res, err := tb.store.CommitContinue(tb.ctx, a.Lease, []byte(`1`), a.Dependents, serveAll())
		require.NoError(t, err)
		require.Equal(t, "b", res.Next.Node, "one dependent continues")
		require.ElementsMatch(t, []string{"c", "d"}, res.Ready, "the others are enqueued")

		tb.submit(t, spec("other", node("a"), node("b", "a")))
		a = tb.claim(t, "other", "a", "w", longTTL)
		res, err = tb.store.CommitContinue(tb.ctx, a.Lease, []byte(`1`), a.Dependents,
			fence.Continue{ClaimID: fence.NewClaimID(), TTL: longTTL, Queues: []string{"gpu"}, Kinds: []string{"noop"}})
		require.NoError(t, err)
		require.Nil(t, res.Next, "a queue the caller does not serve")
		require.Equal(t, []string{"b"}, res.Ready)

		tb.submit(t, spec("kind", node("a"), node("b", "a")))
		a = tb.claim(t, "kind", "a", "w", longTTL)
		res, err = tb.store.CommitContinue(tb.ctx, a.Lease, []byte(`1`), a.Dependents,
			fence.Continue{ClaimID: fence.NewClaimID(), TTL: longTTL, Queues: []string{"default"}, Kinds: []string{"no", "op"}})
		require.NoError(t, err)
		require.Nil(t, res.Next, "a kind the caller does not run (no partial match)")

		tb.submit(t, spec("cancelled", node("a"), node("b", "a")))
		a = tb.claim(t, "cancelled", "a", "w", longTTL)
		_, err = tb.store.Cancel(tb.ctx, "cancelled", "test", "t")
		require.NoError(t, err)
		res, err = tb.store.CommitContinue(tb.ctx, a.Lease, []byte(`1`), a.Dependents, serveAll())
		require.NoError(t, err)
		require.Nil(t, res.Next)
		require.Equal(t, "CANCELLED", res.RunStatus)
	})
}
