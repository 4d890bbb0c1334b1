package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A node naming two busy limits keeps the slot handed to it under the
// first while it waits for the second, past the 10 s a woken waiter has
// to claim a slot: the node that waited behind it under the first limit
// does not take that slot, and once the second frees the node runs.
// Before, its handed slot ran out while it waited, went to the next
// node, and it waited again under the first limit: with both limits kept
// busy, it never ran.
func TestTwoLimitWaiterKeepsItsHandedSlot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		if tb.real() && testing.Short() {
			t.Skip("waits 11 s on a real server's clock")
		}
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		for _, k := range []string{"la", "lb"} {
			require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: k, Concurrency: 1}))
		}
		for r, l := range map[string]string{"ya1": "la=1", "ya2": "la=1", "zb1": "lb=1", "zb2": "lb=1", "x": "la=1,lb=1"} {
			tb.submit(t, limited(r, l))
		}
		ya1 := tb.claim(t, "ya1", "a", "w", longTTL)
		zb1 := tb.claim(t, "zb1", "a", "w", longTTL)
		wait := func(run string) {
			t.Helper()
			_, err := tb.store.ClaimAs(tb.ctx, ref(run, "a"), "w", "claim-"+run, longTTL, grace)
			require.ErrorIs(t, err, fence.ErrLimitWait, "%s waits", run)
		}
		wait("x")   // behind ya1, under la (the first key in order)
		wait("ya2") // behind x, under la
		_, err := tb.store.Commit(tb.ctx, ya1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"x"}, wl.take())
		wait("x")   // la handed to it; lb busy: now behind zb1 under lb
		wait("zb2") // behind x, under lb
		tb.advance(t, 11*time.Second)
		wait("ya2") // the sweeper's recheck: la is still x's
		_, err = tb.store.Commit(tb.ctx, zb1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"x"}, wl.take())
		x, err := tb.store.ClaimAs(tb.ctx, ref("x", "a"), "w", "claim-x", longTTL, grace)
		require.NoError(t, err, "x runs with both slots")
		_, err = tb.store.Commit(tb.ctx, x.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"ya2", "zb2"}, wl.take())
	})
}
