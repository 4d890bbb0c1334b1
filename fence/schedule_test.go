package fence_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// putSchedule stores schedule name with a definition and its first tick,
// and returns it as stored.
func putSchedule(t *testing.T, tb *testBundle, name, def string, next time.Time) fence.ScheduleInfo {
	t.Helper()
	_, _, changed, err := tb.store.PutSchedule(tb.ctx, name, []byte(def), next, "")
	require.NoError(t, err)
	require.True(t, changed)
	info, err := tb.store.GetSchedule(tb.ctx, name)
	require.NoError(t, err)
	return info
}

// TestSchedulePutListDelete: a schedule is stored, listed with its next
// tick, stored again unchanged by the same definition (a retried put),
// replaced by another one (a new generation), and deleted.
func TestSchedulePutListDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		next := time.UnixMilli(tb.redisNow(t).Add(time.Minute).UnixMilli())
		info := putSchedule(t, tb, "nightly", `{"cron":"0 0 * * *"}`, next)
		require.Equal(t, next, info.Next)
		require.EqualValues(t, 1, info.Gen)
		require.True(t, info.Last.IsZero(), "no tick fired yet")

		gen, stored, changed, err := tb.store.PutSchedule(tb.ctx, "nightly", []byte(`{"cron":"0 0 * * *"}`), next.Add(time.Hour), "")
		require.NoError(t, err)
		require.False(t, changed, "the same definition again is a retry")
		require.EqualValues(t, 1, gen)
		require.Equal(t, next, stored, "a retry keeps the stored next tick")

		gen, _, changed, err = tb.store.PutSchedule(tb.ctx, "nightly", []byte(`{"cron":"0 1 * * *"}`), next.Add(time.Hour), "")
		require.NoError(t, err)
		require.True(t, changed)
		require.EqualValues(t, 2, gen)

		_, list, err := tb.store.ListSchedules(tb.ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, `{"cron":"0 1 * * *"}`, string(list[0].Def))
		require.Equal(t, next.Add(time.Hour), list[0].Next)

		require.NoError(t, tb.store.DeleteSchedule(tb.ctx, "nightly"))
		require.ErrorIs(t, tb.store.DeleteSchedule(tb.ctx, "nightly"), fence.ErrNotFound)
		_, err = tb.store.GetSchedule(tb.ctx, "nightly")
		require.ErrorIs(t, err, fence.ErrNotFound)
		_, list, err = tb.store.ListSchedules(tb.ctx)
		require.NoError(t, err)
		require.Empty(t, list)
	})
}

// TestScheduleBadNameStoresNothing: a name that cannot be a key is refused
// before anything is written.
func TestScheduleBadNameStoresNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		for _, name := range []string{"", "a b", "{tag}", "a:b", ".."} {
			_, _, _, err := tb.store.PutSchedule(tb.ctx, name, []byte(`{}`), time.Now(), "")
			require.ErrorIs(t, err, fence.ErrInvalidID, "name %q", name)
		}
		n, err := tb.be.Client.DBSize(tb.ctx).Result()
		require.NoError(t, err)
		require.Zero(t, n, "nothing stored")
	})
}

// TestScheduleFireMovesOnOnce: a firer's step moves the schedule from the
// tick it read to the next and records the tick's run; due listing
// follows Redis's clock.
func TestScheduleFireMovesOnOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		now := tb.redisNow(t)
		tick := time.UnixMilli(now.Add(-time.Second).UnixMilli())
		info := putSchedule(t, tb, "every", `{}`, tick)
		_, due, err := tb.store.DueSchedules(tb.ctx)
		require.NoError(t, err)
		require.Len(t, due, 1, "its tick has passed")

		next := tick.Add(time.Hour)
		replayed, err := tb.store.AdvanceSchedule(tb.ctx, fence.Advance{Name: "every", Gen: info.Gen, Expected: tick,
			Fired: tick, Run: "cron.every.x", Next: next, Outcome: "created"})
		require.NoError(t, err)
		require.False(t, replayed)

		got, err := tb.store.GetSchedule(tb.ctx, "every")
		require.NoError(t, err)
		require.Equal(t, next, got.Next)
		require.Equal(t, tick, got.Last)
		require.Equal(t, "cron.every.x", got.LastRun)
		require.Equal(t, "created", got.Outcome)
		_, due, err = tb.store.DueSchedules(tb.ctx)
		require.NoError(t, err)
		require.Empty(t, due, "its next tick is an hour away")
	})
}

// TestScheduleFireLostReply: a firer whose advance ran but whose reply was
// lost retries the same step and hears success (replayed), and the
// schedule moved on once: the same last tick, the same next.
func TestScheduleFireLostReply(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tick := time.UnixMilli(tb.redisNow(t).Add(-time.Second).UnixMilli())
		info := putSchedule(t, tb, "lossy", `{}`, tick)
		dropper, lossy := tb.lossyStore(t)
		require.NoError(t, lossy.Load(tb.ctx)) // the reply lost is the script's, not a NOSCRIPT's
		step := fence.Advance{Name: "lossy", Gen: info.Gen, Expected: tick, Fired: tick, Run: "cron.lossy.t1",
			Next: tick.Add(time.Second), Outcome: "created"}

		dropper.loseNext("schedule_fire", 1)
		_, err := lossy.AdvanceSchedule(tb.ctx, step)
		require.ErrorIs(t, err, errReplyLost)
		replayed, err := lossy.AdvanceSchedule(tb.ctx, step)
		require.NoError(t, err, "the retry recognises its own step")
		require.True(t, replayed)

		got, err := tb.store.GetSchedule(tb.ctx, "lossy")
		require.NoError(t, err)
		require.Equal(t, tick, got.Last)
		require.Equal(t, tick.Add(time.Second), got.Next)

		// The next tick goes on from there.
		_, err = tb.store.AdvanceSchedule(tb.ctx, fence.Advance{Name: "lossy", Gen: info.Gen, Expected: got.Next,
			Fired: got.Next, Run: "cron.lossy.t2", Next: got.Next.Add(time.Second), Outcome: "created"})
		require.NoError(t, err)
		// A firer that read the first tick and only now steps is told the
		// schedule moved on: nothing changes.
		_, err = tb.store.AdvanceSchedule(tb.ctx, step)
		require.ErrorIs(t, err, fence.ErrScheduleMoved)
		got, err = tb.store.GetSchedule(tb.ctx, "lossy")
		require.NoError(t, err)
		require.Equal(t, "cron.lossy.t2", got.LastRun)
	})
}

// TestScheduleFirersRace: firers that all read the same tick step at once;
// exactly one moves the schedule, the others hear that their step is
// already done, and none errs.
func TestScheduleFirersRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tick := time.UnixMilli(tb.redisNow(t).Add(-time.Second).UnixMilli())
		info := putSchedule(t, tb, "raced", `{}`, tick)
		step := fence.Advance{Name: "raced", Gen: info.Gen, Expected: tick, Fired: tick, Run: "cron.raced.t",
			Next: tick.Add(time.Minute), Outcome: "created"}
		const firers = 8
		var wg sync.WaitGroup
		moved := make(chan bool, firers)
		start := make(chan struct{})
		for range firers {
			wg.Go(func() {
				<-start
				replayed, err := tb.store.AdvanceSchedule(tb.ctx, step)
				if err == nil {
					moved <- !replayed
				} else {
					t.Errorf("firer: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		close(moved)
		n := 0
		for m := range moved {
			if m {
				n++
			}
		}
		require.Equal(t, 1, n, "one firer moved the schedule")
		got, err := tb.store.GetSchedule(tb.ctx, "raced")
		require.NoError(t, err)
		require.Equal(t, tick.Add(time.Minute), got.Next)
	})
}

// TestScheduleFireAfterReplaceOrDelete: a firer that read a schedule
// before it was replaced or deleted changes nothing.
func TestScheduleFireAfterReplaceOrDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tick := time.UnixMilli(tb.redisNow(t).Add(-time.Second).UnixMilli())
		info := putSchedule(t, tb, "changing", `{"v":1}`, tick)
		later := tick.Add(time.Hour)
		_, _, _, err := tb.store.PutSchedule(tb.ctx, "changing", []byte(`{"v":2}`), later, "")
		require.NoError(t, err)
		_, err = tb.store.AdvanceSchedule(tb.ctx, fence.Advance{Name: "changing", Gen: info.Gen, Expected: tick,
			Fired: tick, Next: tick.Add(time.Second)})
		require.ErrorIs(t, err, fence.ErrScheduleChanged)
		got, err := tb.store.GetSchedule(tb.ctx, "changing")
		require.NoError(t, err)
		require.Equal(t, later, got.Next, "the new definition's tick stands")
		require.True(t, got.Last.IsZero())

		require.NoError(t, tb.store.DeleteSchedule(tb.ctx, "changing"))
		_, err = tb.store.AdvanceSchedule(tb.ctx, fence.Advance{Name: "changing", Gen: got.Gen, Expected: later,
			Fired: later, Next: later.Add(time.Second)})
		require.ErrorIs(t, err, fence.ErrNotFound)
		n, err := tb.be.Client.Exists(tb.ctx, tb.store.Keys().Schedule("changing")).Result()
		require.NoError(t, err)
		require.Zero(t, n, "a deleted schedule is not brought back")
	})
}

// TestScheduleFireComparesTheTickLabel: two wall-clock ticks that a
// daylight-saving change skipped are due at the same instant (02:00 and
// 02:30 both at the change, 03:00 EDT). The schedule moves by label as
// well as by due time: a late firer of the first tick, or a retry of its
// step, cannot move the schedule back to the second and fire it twice.
func TestScheduleFireComparesTheTickLabel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		at := time.UnixMilli(tb.redisNow(t).Add(-time.Second).UnixMilli())
		_, _, _, err := tb.store.PutSchedule(tb.ctx, "gap", []byte(`{}`), at, "20260308T020000")
		require.NoError(t, err)
		info, err := tb.store.GetSchedule(tb.ctx, "gap")
		require.NoError(t, err)
		require.Equal(t, "20260308T020000", info.Tick)
		first := fence.Advance{Name: "gap", Gen: info.Gen, Expected: at, ExpectedTick: "20260308T020000",
			Fired: at, FiredTick: "20260308T020000", Run: "cron.gap.20260308T020000",
			Next: at, NextTick: "20260308T023000", Outcome: "created"}
		replayed, err := tb.store.AdvanceSchedule(tb.ctx, first)
		require.NoError(t, err)
		require.False(t, replayed)
		replayed, err = tb.store.AdvanceSchedule(tb.ctx, first)
		require.NoError(t, err)
		require.True(t, replayed, "the same step again is a replay")

		second := fence.Advance{Name: "gap", Gen: info.Gen, Expected: at, ExpectedTick: "20260308T023000",
			Fired: at, FiredTick: "20260308T023000", Run: "cron.gap.20260308T023000",
			Next: at.Add(24 * time.Hour), NextTick: "20260309T020000", Outcome: "created"}
		_, err = tb.store.AdvanceSchedule(tb.ctx, second)
		require.NoError(t, err)

		_, err = tb.store.AdvanceSchedule(tb.ctx, first)
		require.ErrorIs(t, err, fence.ErrScheduleMoved, "a late firer of the first tick")
		got, err := tb.store.GetSchedule(tb.ctx, "gap")
		require.NoError(t, err)
		require.Equal(t, "20260309T020000", got.Tick, "the schedule stays where the second step put it")
		require.Equal(t, at.Add(24*time.Hour), got.Next)
		require.Equal(t, "20260308T023000", got.LastTick)
		require.Equal(t, "cron.gap.20260308T023000", got.LastRun)
	})
}
