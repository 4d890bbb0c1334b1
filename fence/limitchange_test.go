package fence_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// changeBundle runs nodes under one limit key and counts the claims that
// hold a slot, as the operator's promise reads: at most the concurrency
// now set.
type changeBundle struct {
	tb      *testBundle
	wl      *wakeLog
	key     string
	running map[string]*fence.Claimed
}

func newChangeBundle(t *testing.T, tb *testBundle, key string, concurrency int, runs ...string) *changeBundle {
	t.Helper()
	cb := &changeBundle{tb: tb, wl: &wakeLog{}, key: key, running: map[string]*fence.Claimed{}}
	tb.store.SetWake(cb.wl.fn)
	cb.set(t, concurrency)
	for _, r := range runs {
		tb.submit(t, limited(r, key+"=1"))
	}
	return cb
}

func (cb *changeBundle) set(t *testing.T, concurrency int) {
	t.Helper()
	require.NoError(t, cb.tb.store.SetLimit(cb.tb.ctx, fence.Limit{Name: cb.key, Concurrency: concurrency}))
}

// claim claims run's node; ok is false when it must wait for a slot.
func (cb *changeBundle) claim(t *testing.T, run string) bool {
	t.Helper()
	c, err := cb.tb.store.ClaimAs(cb.tb.ctx, ref(run, "a"), "w", "claim-"+run, longTTL, grace)
	if err != nil {
		require.ErrorIs(t, err, fence.ErrLimitWait, "%s", run)
		return false
	}
	cb.running[run] = c
	return true
}

func (cb *changeBundle) commit(t *testing.T, run string) {
	t.Helper()
	_, err := cb.tb.store.Commit(cb.tb.ctx, cb.running[run].Lease, []byte(`1`), nil)
	require.NoError(t, err)
	delete(cb.running, run)
}

// Lowering a limit from 3 to 1 while 3 run: a free hands on by the limit
// now stored, never the one the last claim read, so no waiter is woken
// until the running ones are down to none; then one runs at a time. Before,
// the first free after the change woke a waiter by the old 3.
func TestLoweredLimitFreesByTheStoredLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		cb := newChangeBundle(t, tb, "low", 3, "h1", "h2", "h3", "w1", "w2")
		for _, r := range []string{"h1", "h2", "h3"} {
			require.True(t, cb.claim(t, r))
		}
		require.False(t, cb.claim(t, "w1"))
		require.False(t, cb.claim(t, "w2"))
		cb.set(t, 1)
		require.Empty(t, cb.wl.take(), "a lowered limit wakes nobody")
		cb.commit(t, "h1")
		require.Empty(t, cb.wl.take(), "two still run under a limit of 1: nobody woken")
		require.False(t, cb.claim(t, "w1"), "no slot under the new limit")
		cb.commit(t, "h2")
		require.Empty(t, cb.wl.take())
		cb.commit(t, "h3")
		require.Equal(t, []string{"w1"}, cb.wl.take(), "the first waiter, once none runs")
		require.True(t, cb.claim(t, "w1"))
		require.False(t, cb.claim(t, "w2"), "one at a time")
		cb.commit(t, "w1")
		require.Equal(t, []string{"w2"}, cb.wl.take())
		require.True(t, cb.claim(t, "w2"))
		cb.commit(t, "w2")
		require.Equal(t, fence.LimitKeyState{Key: "low"}, tb.keyState(t, "low"))
	})
}

// Slots handed to woken waiters before the limit was lowered from 3 to 1:
// a waiter's claim does not go past the limit now stored while one runs;
// it waits again, and the running count never passes 1. Before, both
// handed slots were claimed beside the one running: three under 1.
func TestLoweredLimitTakesBackHandedSlots(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		cb := newChangeBundle(t, tb, "handed", 3, "h1", "h2", "h3", "w1", "w2")
		for _, r := range []string{"h1", "h2", "h3"} {
			require.True(t, cb.claim(t, r))
		}
		require.False(t, cb.claim(t, "w1"))
		require.False(t, cb.claim(t, "w2"))
		cb.commit(t, "h1")
		cb.commit(t, "h2")
		require.Equal(t, []string{"w1", "w2"}, cb.wl.take(), "two slots handed on under 3")
		cb.set(t, 1)
		require.False(t, cb.claim(t, "w1"), "h3 runs: the handed slot is past the limit now")
		require.False(t, cb.claim(t, "w2"))
		require.Len(t, cb.running, 1)
		cb.commit(t, "h3")
		woken := cb.wl.take()
		require.Len(t, woken, 1, "one slot, one waiter")
		require.True(t, cb.claim(t, woken[0]))
		other := map[string]string{"w1": "w2", "w2": "w1"}[woken[0]]
		require.False(t, cb.claim(t, other), "one at a time")
		cb.commit(t, woken[0])
		require.Equal(t, []string{other}, cb.wl.take())
		require.True(t, cb.claim(t, other))
		cb.commit(t, other)
		require.Equal(t, fence.LimitKeyState{Key: "handed"}, tb.keyState(t, "handed"))
	})
}

// Raising a limit hands its new slots to the waiters at once: they are
// woken by the change, not at the next claim or free, nor by the sweeper's
// recheck 30 s later. Deleting the limit wakes every waiter.
func TestRaisedLimitWakesWaiters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		cb := newChangeBundle(t, tb, "tenant:acme", 1, "h1", "w1", "w2", "w3")
		// A prefix rule governs the key; raising the rule wakes its waiters.
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "tenant:*", Concurrency: 1}))
		_, err := tb.store.DeleteLimit(tb.ctx, "tenant:acme")
		require.NoError(t, err)
		require.True(t, cb.claim(t, "h1"))
		for _, r := range []string{"w1", "w2", "w3"} {
			require.False(t, cb.claim(t, r))
		}
		require.NoError(t, tb.store.SetLimit(tb.ctx, fence.Limit{Name: "tenant:*", Concurrency: 2}))
		require.Equal(t, []string{"w1"}, cb.wl.take(), "the one new slot, to the first waiter, at once")
		require.True(t, cb.claim(t, "w1"))
		require.False(t, cb.claim(t, "w2"))
		found, err := tb.store.DeleteLimit(tb.ctx, "tenant:*")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, []string{"w2", "w3"}, cb.wl.take(), "no limit now: every waiter woken")
		for _, r := range []string{"w2", "w3"} {
			require.True(t, cb.claim(t, r), "%s runs", r)
		}
		for r := range cb.running {
			cb.commit(t, r)
		}
		require.Empty(t, cb.wl.take())
	})
}

// A limit of 0 or below, or a rate that does not parse, is refused with
// ErrInvalidData naming the field, and nothing stored changes: the
// definition, and the concurrency the key's frees hand on by.
func TestSetLimitRefusesBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		cb := newChangeBundle(t, tb, "bad", 1, "h1", "w1")
		require.True(t, cb.claim(t, "h1"))
		require.False(t, cb.claim(t, "w1"))
		for _, c := range []struct {
			l    fence.Limit
			want string
		}{
			{fence.Limit{Name: "bad", Concurrency: -1}, "concurrency: -1"},
			{fence.Limit{Name: "bad"}, "concurrency, rate: set one or both"},
			{fence.Limit{Name: "bad", Rate: -5, Period: time.Second}, "rate: -5"},
			{fence.Limit{Name: "bad", Rate: 5}, "rate: period"},
			{fence.Limit{Name: "bad", Concurrency: 3, Burst: -1}, "burst: -1"},
		} {
			err := tb.store.SetLimit(tb.ctx, c.l)
			require.ErrorIs(t, err, fence.ErrInvalidData, "%+v", c.l)
			require.ErrorContains(t, err, c.want)
		}
		for body, want := range map[string]string{
			`{"name": "bad", "concurrency": 0}`:       "concurrency: 0",
			`{"name": "bad", "rate": "ten/s"}`:        `rate: "ten/s"`,
			`{"name": "bad", "rate": "10/fortnight"}`: "fortnight",
		} {
			var l fence.Limit
			err := json.Unmarshal([]byte(body), &l)
			require.ErrorIs(t, err, fence.ErrInvalidData, body)
			require.ErrorContains(t, err, want)
		}
		limits, err := tb.store.Limits(tb.ctx)
		require.NoError(t, err)
		require.Equal(t, []fence.Limit{{Name: "bad", Concurrency: 1}}, limits, "the definition is unchanged")
		require.Empty(t, cb.wl.take(), "no waiter woken")
		cb.commit(t, "h1")
		require.Equal(t, []string{"w1"}, cb.wl.take(), "the key still hands on by 1")
		require.True(t, cb.claim(t, "w1"))
		cb.commit(t, "w1")
	})
}

// A node running under a limit that is deleted and is then taken over
// (its owner paused past the lease): the takeover moves the slot to the
// new claim, whose end frees it. Before, the takeover left the old
// claim's slot in place, no end ever freed it, and once the limit was set
// again the key had one slot fewer, for good: with a concurrency of 1,
// every later node waited forever.
func TestTakeoverUnderDeletedLimitFreesTheSlot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		cb := newChangeBundle(t, tb, "gone", 1, "p1", "n1")
		old, err := tb.store.ClaimAs(tb.ctx, ref("p1", "a"), "paused", "old", shortTTL, grace)
		require.NoError(t, err)
		_, err = tb.store.DeleteLimit(tb.ctx, "gone")
		require.NoError(t, err)
		tb.advance(t, pastExpiry)
		took, err := tb.store.ClaimAs(tb.ctx, ref("p1", "a"), "w2", "new", longTTL, grace)
		require.NoError(t, err)
		require.Equal(t, "paused", took.PrevOwner)
		_, err = tb.store.Commit(tb.ctx, old.Lease, []byte(`1`), nil)
		require.True(t, fence.IsFenced(err), "%v", err)
		_, err = tb.store.Commit(tb.ctx, took.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		cb.set(t, 1)
		require.True(t, cb.claim(t, "n1"), "the slot was freed by the takeover's end")
		cb.commit(t, "n1")
		require.Equal(t, fence.LimitKeyState{Key: "gone"}, tb.keyState(t, "gone"))
	})
}
