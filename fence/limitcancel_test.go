package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A waiter cancelled after a freed slot was handed to it keeps no slot:
// the cancel hands it to the next waiter at once, in the same script,
// and that waiter claims it straight away.
func TestCancelledWaiterPassesItsHandedSlotOn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "k", Concurrency: 1}))
		for _, r := range []string{"holder", "waiter", "third"} {
			tb.submit(t, limited(r, "k=1"))
		}
		c1 := tb.claim(t, "holder", "a", "w1", longTTL)
		for _, r := range []string{"waiter", "third"} {
			_, err := tb.store.Claim(tb.ctx, ref(r, "a"), "w2", longTTL, grace)
			require.ErrorIs(t, err, fence.ErrLimitWait, r)
		}
		tb.commit(t, c1, `1`)
		require.Equal(t, []string{"waiter"}, wl.take(), "the slot is handed to the first waiter")
		_, err := tb.store.Claim(tb.ctx, ref("third", "a"), "w3", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrLimitWait, "the handed slot is the waiter's")

		res, err := tb.store.Cancel(tb.ctx, "waiter", "not needed", "test")
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", res.RunStatus)
		require.Equal(t, []string{"third"}, wl.take(), "the cancel handed the slot on and woke the next waiter")
		c3 := tb.claim(t, "third", "a", "w3", longTTL)
		st, err := tb.store.LimitStates(tb.ctx)
		require.NoError(t, err)
		require.Equal(t, fence.LimitKeyState{Key: "k", InUse: 1}, st[0].Keys[0], "one slot held, by third; no waiter left")
		tb.commit(t, c3, `1`)
		st, err = tb.store.LimitStates(tb.ctx)
		require.NoError(t, err)
		require.Equal(t, fence.LimitKeyState{Key: "k"}, st[0].Keys[0], "all free at the end")
		require.Empty(t, wl.take())
	})
}

// A waiter cancelled while still queued leaves the queue: the next freed
// slot goes to the one behind it, not to the cancelled node.
func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		var wl wakeLog
		tb.store.SetWake(wl.fn)
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "k", Concurrency: 1}))
		for _, r := range []string{"holder", "waiter", "third"} {
			tb.submit(t, limited(r, "k=1"))
		}
		c1 := tb.claim(t, "holder", "a", "w1", longTTL)
		for _, r := range []string{"waiter", "third"} {
			_, err := tb.store.Claim(tb.ctx, ref(r, "a"), "w2", longTTL, grace)
			require.ErrorIs(t, err, fence.ErrLimitWait, r)
		}
		_, err := tb.store.Cancel(tb.ctx, "waiter", "not needed", "test")
		require.NoError(t, err)
		require.Empty(t, wl.take(), "no slot was free to hand on")
		st, err := tb.store.LimitStates(tb.ctx)
		require.NoError(t, err)
		require.Equal(t, fence.LimitKeyState{Key: "k", InUse: 1, Waiting: 1}, st[0].Keys[0])
		tb.commit(t, c1, `1`)
		require.Equal(t, []string{"third"}, wl.take())
		tb.claim(t, "third", "a", "w3", longTTL)
	})
}

// handedTo sets up a limit of 1, a holder that has ended and handed its
// slot to the waiter run a (whose node has not claimed it yet), and a
// third run waiting behind it.
func handedTo(t *testing.T, tb *testBundle, wl *wakeLog, waiter fence.SubmitArgs) {
	t.Helper()
	tb.store.SetWake(wl.fn)
	require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "k", Concurrency: 1}))
	tb.submit(t, limited("holder", "k=1"))
	_, err := tb.store.Submit(tb.ctx, waiter)
	require.NoError(t, err)
	tb.submit(t, limited("third", "k=1"))
	c1 := tb.claim(t, "holder", "a", "w1", longTTL)
	for _, n := range []fence.NodeRef{{Thread: cmpOr(waiter.Thread, waiter.Run), Run: waiter.Run, Node: "a"}, ref("third", "a")} {
		_, err := tb.store.Claim(tb.ctx, n, "w2", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrLimitWait, n.Run)
	}
	tb.commit(t, c1, `1`)
	require.Equal(t, []string{waiter.Run}, wl.take(), "the slot is handed to the waiter")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// A run's timeout cancels a waiter holding a handed slot: the sweep's
// timeout script hands it on to the next waiter at once.
func TestTimedOutWaiterPassesItsHandedSlotOn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		var wl wakeLog
		w := limited("waiter", "k=1")
		w.Timeout, w.TimeoutLabel = 300*time.Millisecond, "300ms"
		handedTo(t, tb, &wl, w)
		tb.advance(t, 400*time.Millisecond)
		out, err := tb.store.TimeOutRuns(tb.ctx, "sweeper", 10)
		require.NoError(t, err)
		require.Len(t, out, 1)
		require.Equal(t, "CANCELLED", out[0].Status)
		require.Equal(t, []string{"third"}, wl.take(), "the timeout handed the slot on")
		tb.claim(t, "third", "a", "w3", longTTL)
	})
}

// A submit that interrupts its thread's active run, whose waiting node
// was handed a slot: the slot goes to the next waiter in the submit's own
// script.
func TestInterruptedWaiterPassesItsHandedSlotOn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		var wl wakeLog
		w := limited("waiter", "k=1")
		w.Thread = "chat"
		handedTo(t, tb, &wl, w)
		next := spec("next", node("n"))
		next.Thread, next.Multitask = "chat", "interrupt"
		_, err := tb.store.Submit(tb.ctx, next)
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", tb.getRun(t, "waiter").Status)
		require.Equal(t, []string{"third"}, wl.take(), "the interrupt handed the slot on")
		tb.claim(t, "third", "a", "w3", longTTL)
	})
}
