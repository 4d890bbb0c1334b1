package fence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// keyState reads limit key's state as enqueue limit list shows it.
func (tb *testBundle) keyState(t *testing.T, key string) fence.LimitKeyState {
	t.Helper()
	st, err := tb.store.LimitStates(tb.ctx)
	require.NoError(t, err)
	for _, l := range st {
		for _, k := range l.Keys {
			if k.Key == key {
				k.Tokens = nil
				return k
			}
		}
	}
	return fence.LimitKeyState{Key: key}
}

// A claim of a node naming a concurrency limit and a rate, whose reply was
// lost and which is retried under its claim id: it holds one slot and took
// its cost from the rate once, as one call would.
func TestLostClaimReplyHoldsOneSlot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		dropper, lossy := tb.lossyStore(t)
		spendLimits(t, tb) // rpm: 51 tokens when idle
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "k", Concurrency: 2}))
		for _, r := range []string{"r1", "r2", "r3"} {
			tb.submit(t, limited(r, "k=1,rpm=1"))
		}
		// The first call answers -31 (the node has limits); the second,
		// with the limit keys, claims, and its reply is lost.
		dropper.loseAfter("claim", 1, 1)
		_, err := lossy.ClaimAs(tb.ctx, ref("r1", "a"), "w", "claim-r1", longTTL, grace)
		require.ErrorIs(t, err, errReplyLost)
		c, err := lossy.ClaimAs(tb.ctx, ref("r1", "a"), "w", "claim-r1", longTTL, grace)
		require.NoError(t, err, "the retry answers as the lost claim")
		require.Equal(t, int64(1), c.Attempt)
		require.Equal(t, int64(1), c.Epoch)
		require.Equal(t, fence.LimitKeyState{Key: "k", InUse: 1}, tb.keyState(t, "k"), "one slot held")
		require.Equal(t, int64(50), tb.tokens(t, "rpm"), "the cost taken once")
		require.Len(t, ofType(tb.events(t, "r1"), "claimed"), 1)

		tb.claim(t, "r2", "a", "w2", longTTL)
		_, err = tb.store.Claim(tb.ctx, ref("r3", "a"), "w3", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrLimitWait, "two slots, two holders")
		require.Equal(t, int64(49), tb.tokens(t, "rpm"))
	})
}

// An end of a slot holder's attempt (commit, fail, release, park) whose reply
// was lost and which is replayed: the slot is freed once and handed to the
// waiter once, and the waiter is woken exactly once (by the replay, the
// lost reply having woken nobody); the other holder keeps its slot, so a
// later node still waits; every slot is free at the end.
func TestLostEndReplyFreesTheSlotOnce(t *testing.T) {
	ops := []struct {
		name, script string
		op           func(ctx context.Context, s *fence.Store, c *fence.Claimed) error
	}{
		{"commit", "commit", func(ctx context.Context, s *fence.Store, c *fence.Claimed) error {
			_, err := s.Commit(ctx, c.Lease, []byte(`1`), nil)
			return err
		}},
		{"fail and retry", "fail", func(ctx context.Context, s *fence.Store, c *fence.Claimed) error {
			_, err := s.Fail(ctx, c.Lease, fence.Failure{Err: "boom"}, nil)
			return err
		}},
		{"fail for good", "fail", func(ctx context.Context, s *fence.Store, c *fence.Claimed) error {
			_, err := s.Fail(ctx, c.Lease, fence.Failure{Err: "boom", Final: true}, nil)
			return err
		}},
		{"release", "release", func(ctx context.Context, s *fence.Store, c *fence.Claimed) error {
			_, err := s.Release(ctx, c.Lease, "shutdown")
			return err
		}},
		{"park", "park", func(ctx context.Context, s *fence.Store, c *fence.Claimed) error {
			_, err := s.Park(ctx, c.Lease, fence.Wait{ID: "wait-" + c.Run, Request: []byte(`"approve?"`)})
			return err
		}},
	}
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		dropper, lossy := tb.lossyStore(t)
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		lossy.SetWake(wl.fn)
		for i, o := range ops {
			t.Run(o.name, func(t *testing.T) {
				k := fmt.Sprintf("k%d", i)
				run := func(name string) string { return fmt.Sprintf("%s%d", name, i) }
				require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: k, Concurrency: 2}))
				for _, r := range []string{"holder", "other", "waiter", "late"} {
					tb.submit(t, limited(run(r), k+"=1"))
				}
				holder := tb.claim(t, run("holder"), "a", "w1", longTTL)
				other := tb.claim(t, run("other"), "a", "w2", longTTL)
				_, err := tb.store.Claim(tb.ctx, ref(run("waiter"), "a"), "w3", longTTL, grace)
				require.ErrorIs(t, err, fence.ErrLimitWait)

				dropper.loseNext(o.script, 1)
				require.ErrorIs(t, o.op(tb.ctx, lossy, holder), errReplyLost)
				require.Empty(t, wl.take(), "a lost reply wakes nobody")
				require.NoError(t, o.op(tb.ctx, lossy, holder), "the replay")
				require.Equal(t, []string{run("waiter")}, wl.take(), "the replay wakes the waiter the lost reply named")
				require.Equal(t, fence.LimitKeyState{Key: k, InUse: 2}, tb.keyState(t, k),
					"the other holder's slot and the waiter's: the slot was freed once")

				_, err = tb.store.Claim(tb.ctx, ref(run("late"), "a"), "w4", longTTL, grace)
				require.ErrorIs(t, err, fence.ErrLimitWait, "no third slot")
				waiter := tb.claim(t, run("waiter"), "a", "w3", longTTL)
				require.NoError(t, o.op(tb.ctx, lossy, holder), "a replay after the waiter claimed")
				require.Empty(t, wl.take(), "wakes nobody again")
				require.Equal(t, fence.LimitKeyState{Key: k, InUse: 2, Waiting: 1}, tb.keyState(t, k))

				tb.commit(t, other, `1`)
				require.Equal(t, []string{run("late")}, wl.take())
				late := tb.claim(t, run("late"), "a", "w4", longTTL)
				tb.commit(t, waiter, `1`)
				tb.commit(t, late, `1`)
				require.Empty(t, wl.take())
				require.Equal(t, map[string]string{"commit": "SUCCEEDED", "fail and retry": "READY", "fail for good": "FAILED",
					"release": "READY", "park": "WAITING"}[o.name], tb.nodeInfo(t, run("holder"), "a").State)
				require.Equal(t, fence.LimitKeyState{Key: k}, tb.keyState(t, k), "all free at the end: the holder's node holds none")
			})
		}
	})
}

// A commit or fail reporting a spend whose reply was lost, replayed:
// the difference is charged (or refunded) once.
func TestLostSpendReplyChargesOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		dropper, lossy := tb.lossyStore(t)
		spendLimits(t, tb) // tpm: 51 tokens when idle
		tb.submit(t, limited("r1", "tpm=~10"))
		tb.submit(t, limited("r2", "tpm=~10"))
		c := tb.claim(t, "r1", "a", "w", longTTL)
		require.Equal(t, int64(41), tb.tokens(t, "tpm"))
		sp := fence.Spend{Cost: 30, Reported: true}
		dropper.loseNext("commit", 1)
		_, err := lossy.CommitVia(tb.ctx, nil, c.Lease, []byte(`1`), nil, fence.Continue{}, sp)
		require.ErrorIs(t, err, errReplyLost)
		res, err := lossy.CommitVia(tb.ctx, nil, c.Lease, []byte(`1`), nil, fence.Continue{}, sp)
		require.NoError(t, err)
		require.True(t, res.Replay)
		require.Equal(t, int64(21), tb.tokens(t, "tpm"), "20 more charged, once")
		require.Len(t, ofType(tb.events(t, "r1"), "committed"), 1)

		c2 := tb.claim(t, "r2", "a", "w", longTTL)
		require.Equal(t, int64(11), tb.tokens(t, "tpm"))
		f := fence.Failure{Err: "boom", Final: true, Spend: fence.Spend{Cost: 2, Reported: true}}
		dropper.loseNext("fail", 1)
		_, err = lossy.Fail(tb.ctx, c2.Lease, f, nil)
		require.ErrorIs(t, err, errReplyLost)
		_, err = lossy.Fail(tb.ctx, c2.Lease, f, nil)
		require.NoError(t, err)
		require.Equal(t, int64(19), tb.tokens(t, "tpm"), "8 refunded, once")
		require.Len(t, ofType(tb.events(t, "r2"), "failed"), 1)
	})
}

// A cancel of a run whose READY node was handed a freed slot, whose reply
// was lost and which is replayed: the slot goes on to the next waiter
// once, and that waiter is woken exactly once.
func TestLostCancelReplyHandsTheSlotOnOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		dropper, lossy := tb.lossyStore(t)
		var wl wakeLog
		lossy.SetWake(wl.fn)
		handedTo(t, tb, &wl, limited("waiter", "k=1"))
		// The first call answers -31 (the READY node has limits); the
		// second, with the limit keys, cancels, and its reply is lost.
		dropper.loseAfter("cancel", 1, 1)
		_, err := lossy.Cancel(tb.ctx, "waiter", "not needed", "test")
		require.ErrorIs(t, err, errReplyLost)
		require.Empty(t, wl.take(), "a lost reply wakes nobody")
		res, err := lossy.Cancel(tb.ctx, "waiter", "not needed", "test")
		require.NoError(t, err)
		require.True(t, res.Already)
		require.Equal(t, "CANCELLED", res.RunStatus)
		require.Equal(t, []string{"third"}, wl.take(), "the replay wakes the waiter the slot went to")
		require.Equal(t, fence.LimitKeyState{Key: "k", InUse: 1}, tb.keyState(t, "k"), "one slot, third's")
		require.Len(t, ofType(tb.events(t, "waiter"), "cancelled"), 1)

		c3 := tb.claim(t, "third", "a", "w3", longTTL)
		tb.commit(t, c3, `1`)
		require.Equal(t, fence.LimitKeyState{Key: "k"}, tb.keyState(t, "k"), "all free at the end")
		require.Empty(t, wl.take())
	})
}

// A claim whose reply was lost after it took the node's only slot, retried
// under its claim id: the replay answers with the node's limits, as the
// first answer had them, so the attempt's end frees the slot and the next
// node waiting for it runs. Before, the replay answered without them and
// the slot stayed held forever.
func TestReplayedClaimFreesItsSlotAtTheEnd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		dropper, lossy := tb.lossyStore(t)
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		lossy.SetWake(wl.fn)
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "one", Concurrency: 1}))
		tb.submit(t, limited("first", "one=1"))
		tb.submit(t, limited("next", "one=1"))
		dropper.loseAfter("claim", 1, 1)
		_, err := lossy.ClaimAs(tb.ctx, ref("first", "a"), "w", "claim-first", longTTL, grace)
		require.ErrorIs(t, err, errReplyLost)
		c, err := lossy.ClaimAs(tb.ctx, ref("first", "a"), "w", "claim-first", longTTL, grace)
		require.NoError(t, err)
		require.Equal(t, "one=1", c.Limits, "the replay names the node's limits")

		_, err = tb.store.Claim(tb.ctx, ref("next", "a"), "w2", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrLimitWait)
		_, err = tb.store.Commit(tb.ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"next"}, wl.take(), "the end freed the slot and woke the waiter")
		n := tb.claim(t, "next", "a", "w2", longTTL)
		_, err = tb.store.Commit(tb.ctx, n.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, fence.LimitKeyState{Key: "one"}, tb.keyState(t, "one"), "no slot held at the end")
	})
}

// A claim told to wait that handed a free slot to the waiter ahead of it
// on its way, whose reply was lost: resent under its claim id, it names
// that waiter again, so the waiter is woken now rather than by the
// sweeper's recheck 30 s later. (The free slot: a handed slot ran out.)
func TestLostWaitingClaimReplyWakesAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		if tb.real() && testing.Short() {
			t.Skip("waits 11 s on a real server's clock")
		}
		dropper, lossy := tb.lossyStore(t)
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		lossy.SetWake(wl.fn)
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "one", Concurrency: 1}))
		for _, r := range []string{"h", "w1", "w2", "x"} {
			tb.submit(t, limited(r, "one=1"))
		}
		h := tb.claim(t, "h", "a", "w", longTTL)
		for _, r := range []string{"w1", "w2"} {
			_, err := tb.store.Claim(tb.ctx, ref(r, "a"), "w", longTTL, grace)
			require.ErrorIs(t, err, fence.ErrLimitWait)
		}
		_, err := tb.store.Commit(tb.ctx, h.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"w1"}, wl.take())
		tb.advance(t, 11*time.Second) // w1 never claims: its handed slot runs out
		dropper.loseAfter("claim", 1, 1)
		_, err = lossy.ClaimAs(tb.ctx, ref("x", "a"), "w", "claim-x", longTTL, grace)
		require.ErrorIs(t, err, errReplyLost)
		require.Empty(t, wl.take(), "the lost reply woke nobody")
		_, err = lossy.ClaimAs(tb.ctx, ref("x", "a"), "w", "claim-x", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrLimitWait)
		require.Equal(t, []string{"w2"}, wl.take(), "the resent claim names the waiter it handed the slot to")
	})
}
