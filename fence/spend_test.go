package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// tokens reads the rate tokens left of limit name's key (its own name) as
// enqueue limit list shows them.
func (tb *testBundle) tokens(t *testing.T, name string) int64 {
	t.Helper()
	st, err := tb.store.LimitStates(tb.ctx)
	require.NoError(t, err)
	for _, l := range st {
		if l.Name == name {
			for _, k := range l.Keys {
				if k.Key == name && k.Tokens != nil {
					return *k.Tokens
				}
			}
		}
	}
	t.Fatalf("limit %s has no rate state listed: %+v", name, st)
	return 0
}

// spendLimits sets "tpm" and "rpm", each 100 an hour with burst 50 (51
// tokens when idle; one token is 36 s, so the clock moving during a test
// changes no count).
func spendLimits(t *testing.T, tb *testBundle) {
	t.Helper()
	for _, n := range []string{"tpm", "rpm"} {
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: n, Rate: 100, Period: time.Hour, Burst: 50}))
	}
}

// A commit's reported spend replaces the claim's cost on the limit named
// with a cost, and leaves the one named alone; a replay charges nothing
// again; a fail refunds as a commit charges.
func TestSpendChargesMeteredLimits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		spendLimits(t, tb)
		tb.submit(t, limited("r1", "tpm=~10,rpm=1"))
		tb.submit(t, limited("r2", "tpm=~10,rpm=1"))
		c := tb.claim(t, "r1", "a", "w", longTTL)
		require.Equal(t, int64(41), tb.tokens(t, "tpm"), "the claim took the spec's cost")
		require.Equal(t, int64(50), tb.tokens(t, "rpm"))

		sp := fence.Spend{Cost: 30, Reported: true}
		_, err := tb.store.CommitVia(tb.ctx, nil, c.Lease, []byte(`1`), nil, fence.Continue{}, sp)
		require.NoError(t, err)
		require.Equal(t, int64(21), tb.tokens(t, "tpm"), "30 spent in all: 20 more charged")
		require.Equal(t, int64(50), tb.tokens(t, "rpm"), "a limit named without a cost is not charged")
		ev := ofType(tb.events(t, "r1"), "committed")
		require.Len(t, ev, 1)
		require.Equal(t, "30", ev[0].Details["spent"])
		require.Equal(t, "tpm=20", ev[0].Details["charged"])

		again, err := tb.store.CommitVia(tb.ctx, nil, c.Lease, []byte(`1`), nil, fence.Continue{}, sp)
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.Equal(t, int64(21), tb.tokens(t, "tpm"), "the replay charged nothing")

		c2 := tb.claim(t, "r2", "a", "w", longTTL)
		require.Equal(t, int64(11), tb.tokens(t, "tpm"))
		_, err = tb.store.Fail(tb.ctx, c2.Lease, fence.Failure{Err: "boom", Final: true, Spend: fence.Spend{Cost: 2, Reported: true}}, nil)
		require.NoError(t, err)
		require.Equal(t, int64(19), tb.tokens(t, "tpm"), "8 of the 10 reserved refunded")
		_, err = tb.store.Fail(tb.ctx, c2.Lease, fence.Failure{Err: "boom", Final: true, Spend: fence.Spend{Cost: 2, Reported: true}}, nil)
		require.NoError(t, err, "a replayed fail")
		require.Equal(t, int64(19), tb.tokens(t, "tpm"), "the replayed fail refunded nothing again")
	})
}

// A stale owner's spend changes nothing: its commit is fenced before any
// charge; a spend out of range charges nothing; a refund stops at a full
// bucket.
func TestSpendStaleAndBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		spendLimits(t, tb)
		tb.submit(t, limited("r1", "tpm=~10"))
		tb.submit(t, limited("r2", "tpm=~10"))
		stale := tb.claim(t, "r1", "a", "paused", shortTTL)
		tb.advance(t, pastExpiry)
		took := tb.claim(t, "r1", "a", "taker", longTTL)
		require.Equal(t, int64(31), tb.tokens(t, "tpm"), "the takeover took the cost again")
		_, err := tb.store.CommitVia(tb.ctx, nil, stale.Lease, []byte(`1`), nil, fence.Continue{}, fence.Spend{Cost: 5000, Reported: true})
		require.True(t, fence.IsFenced(err), "stale commit refused: %v", err)
		_, err = tb.store.Fail(tb.ctx, stale.Lease, fence.Failure{Err: "late", Spend: fence.Spend{Cost: 5000, Reported: true}}, nil)
		require.True(t, fence.IsFenced(err), "stale fail refused: %v", err)
		require.Equal(t, int64(31), tb.tokens(t, "tpm"), "the stale owner's spend charged nothing")

		require.Error(t, fence.CheckSpend(-1))
		require.Error(t, fence.CheckSpend(fence.MaxSpend+1))
		_, err = tb.store.CommitVia(tb.ctx, nil, took.Lease, []byte(`1`), nil, fence.Continue{}, fence.Spend{Cost: -5, Reported: true})
		require.NoError(t, err, "a bad spend is not sent; the commit goes on")
		require.Equal(t, int64(31), tb.tokens(t, "tpm"), "nothing charged or refunded")

		c2 := tb.claim(t, "r2", "a", "w", longTTL)
		require.Equal(t, int64(21), tb.tokens(t, "tpm"))
		_, err = tb.store.CommitVia(tb.ctx, nil, c2.Lease, []byte(`1`), nil, fence.Continue{}, fence.Spend{Cost: 0, Reported: true})
		require.NoError(t, err)
		require.Equal(t, int64(31), tb.tokens(t, "tpm"), "a spend of 0 refunds the whole reservation")
	})
}
