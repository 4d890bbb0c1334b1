package fence_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// limited is a one-node run whose node names limits ("k=1").
func limited(run, limits string) fence.SubmitArgs {
	a := spec(run, node("a"))
	a.Nodes[0].Limits = limits
	return a
}

// wakeLog records the nodes the store handed a freed slot to.
type wakeLog struct {
	mu  sync.Mutex
	got []string
}

func (w *wakeLog) fn(_ context.Context, ws []fence.Woken) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range ws {
		w.got = append(w.got, x.Node.Run)
	}
}

func (w *wakeLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = nil
	return out
}

// A concurrency limit of 1: the second node waits READY saying why, in
// order; the commit that frees the slot hands it to the first waiter and
// wakes it; a node that is not first cannot take the handed slot.
func TestLimitConcurrencySlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "k", Concurrency: 1}))
		for _, r := range []string{"r1", "r2", "r3"} {
			tb.submit(t, limited(r, "k=1"))
		}
		c1 := tb.claim(t, "r1", "a", "w1", longTTL)
		require.Equal(t, "k=1", c1.Limits)
		for _, r := range []string{"r2", "r3"} {
			_, err := tb.store.Claim(tb.ctx, ref(r, "a"), "w2", longTTL, grace)
			var lw *fence.LimitWaitError
			require.ErrorAs(t, err, &lw, r)
			require.Equal(t, "k", lw.Key)
			require.Equal(t, "READY", tb.nodeInfo(t, r, "a").State, "a waiting node stays READY")
		}
		st, err := tb.store.LimitStates(tb.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, st[0].Keys[0].InUse)
		require.Equal(t, 2, st[0].Keys[0].Waiting)

		tb.commit(t, c1, `1`)
		require.Equal(t, []string{"r2"}, wl.take(), "the first waiter is woken, once")
		_, err = tb.store.Claim(tb.ctx, ref("r3", "a"), "w3", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrLimitWait, "r3 cannot take the slot handed to r2")
		c2 := tb.claim(t, "r2", "a", "w2", longTTL)
		_, err = tb.store.Fail(tb.ctx, c2.Lease, fence.Failure{Err: "boom", Final: true}, nil)
		require.NoError(t, err)
		require.Equal(t, []string{"r3"}, wl.take(), "a final failure frees the slot too")
		c3 := tb.claim(t, "r3", "a", "w3", longTTL)
		_, err = tb.store.Release(tb.ctx, c3.Lease, "shutdown")
		require.NoError(t, err)
		st, err = tb.store.LimitStates(tb.ctx)
		require.NoError(t, err)
		require.Equal(t, fence.LimitKeyState{Key: "k"}, st[0].Keys[0], "all slots free at the end")
	})
}

// A slot holder whose lease ran out: the takeover takes its slot over;
// the stale owner's late commit and release free nothing.
func TestLimitSlotMovesOnTakeover(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "k", Concurrency: 1}))
		tb.submit(t, limited("r1", "k=1"))
		tb.submit(t, limited("r2", "k=1"))
		stale := tb.claim(t, "r1", "a", "paused", shortTTL)
		tb.advance(t, pastExpiry)
		took := tb.claim(t, "r1", "a", "taker", longTTL)
		require.Equal(t, "paused", took.PrevOwner)

		_, err := tb.store.Commit(tb.ctx, stale.Lease, []byte(`1`), nil)
		require.True(t, fence.IsFenced(err), "stale commit refused: %v", err)
		_, err = tb.store.Release(tb.ctx, stale.Lease, "late")
		require.True(t, fence.IsFenced(err), "stale release refused: %v", err)
		_, err = tb.store.Claim(tb.ctx, ref("r2", "a"), "w2", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrLimitWait, "the slot is still the takeover's")
		require.Empty(t, wl.take(), "the stale writes woke nobody")

		tb.commit(t, took, `1`)
		require.Equal(t, []string{"r2"}, wl.take())
		tb.claim(t, "r2", "a", "w2", longTTL)
	})
}

// A rate of 2 per 4 s (a token every 2 s) with burst 1: two claims at
// once, the third not due until the first claim's token is back, 2 s
// after it on Redis's clock, and no slot or attempt taken. Bounded by
// Redis's clock before and after the first claim, so a slow machine moves
// neither end.
func TestLimitRate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "api", Rate: 2, Period: 4 * time.Second, Burst: 1}))
		for _, r := range []string{"r1", "r2", "r3"} {
			tb.submit(t, limited(r, "api=1"))
		}
		before := tb.redisNow(t)
		tb.claim(t, "r1", "a", "w", longTTL)
		after := tb.redisNow(t)
		tb.claim(t, "r2", "a", "w", longTTL)
		_, err := tb.store.Claim(tb.ctx, ref("r3", "a"), "w", longTTL, grace)
		var nd *fence.NotDueError
		require.ErrorAs(t, err, &nd)
		require.Equal(t, "api", nd.Limit)
		require.False(t, nd.ReadyAt.Before(before.Add(2*time.Second).Truncate(time.Millisecond)), "due at %s", nd.ReadyAt)
		require.False(t, nd.ReadyAt.After(after.Add(2*time.Second+time.Millisecond)), "due at %s", nd.ReadyAt)
		require.Equal(t, int64(0), tb.nodeInfo(t, "r3", "a").Attempt)
		tb.advance(t, 2100*time.Millisecond)
		tb.claim(t, "r3", "a", "w", longTTL)
	})
}
