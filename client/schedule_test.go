package client_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/spec"
)

// schedBundle is a client on miniredis whose clock the test sets.
type schedBundle struct {
	mini *miniredis.Miniredis
	c    *client.Client
	now  time.Time
}

func schedSetup(t *testing.T) *schedBundle {
	t.Helper()
	m, rdb := redistest.Mini(t)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	b := &schedBundle{mini: m, c: c}
	b.at(time.Date(2026, 12, 4, 10, 0, 0, 500e6, time.UTC))
	return b
}

// at sets Redis's clock.
func (b *schedBundle) at(now time.Time) { b.now = now; b.mini.SetTime(now) }

func oneNode() *spec.Run {
	return &spec.Run{Nodes: []spec.Node{{ID: "a", Kind: "noop"}}}
}

// fire runs one FireDue as a runner's scheduler does.
func (b *schedBundle) fire(t *testing.T) []client.Fired {
	t.Helper()
	out, err := b.c.FireDue(t.Context(), time.Minute)
	require.NoError(t, err)
	return out
}

// TestScheduleFiresEachTickOnce: a minutely schedule is not due before
// its first tick; at it, one run named for the tick is submitted; firing
// again in the same minute submits nothing.
func TestScheduleFiresEachTickOnce(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	ctx := t.Context()
	st, changed, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "minutely", Cron: "* * * * *", Run: oneNode()})
	require.NoError(t, err)
	require.True(t, changed)
	tick := time.Date(2026, 12, 4, 10, 1, 0, 0, time.UTC)
	require.Equal(t, tick, st.Next.UTC(), "the first tick after now")
	require.Empty(t, b.fire(t), "not due yet")

	b.at(tick.Add(300 * time.Millisecond))
	fired := b.fire(t)
	require.Len(t, fired, 1)
	require.Equal(t, "cron.minutely.20261204T100100Z", fired[0].Run)
	require.Equal(t, client.FiredCreated, fired[0].Outcome)
	info, err := b.c.Status(ctx, fired[0].Run)
	require.NoError(t, err)
	require.Equal(t, "RUNNING", info.Status)
	require.Empty(t, b.fire(t), "the tick is done")

	st, err = b.c.Schedule(ctx, "minutely")
	require.NoError(t, err)
	require.Equal(t, tick, st.Last.UTC())
	require.Equal(t, tick.Add(time.Minute), st.Next.UTC())
	require.Equal(t, fired[0].Run, st.LastRun)
}

// TestScheduleFirersRaceMakeOneRun: several clients fire the same due
// tick at once: one run, every firer content.
func TestScheduleFirersRaceMakeOneRun(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	ctx := t.Context()
	_, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "raced", Cron: "* * * * * *", Run: oneNode()})
	require.NoError(t, err)
	b.at(b.now.Add(time.Second)) // one tick due: 10:00:01
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := map[string]int{}
	for range 4 {
		c, err := client.New(client.Config{Redis: b.c.Store().Redis()})
		require.NoError(t, err)
		wg.Go(func() {
			out, err := c.FireDue(ctx, time.Minute)
			if err != nil {
				t.Errorf("firer: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range out {
				if f.Outcome == client.FiredCreated {
					created[f.Run]++
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, map[string]int{"cron.raced.20261204T100001Z": 1}, created, "one firer created the tick's run")
	runs, err := b.c.List(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, runs, 1)
}

// TestScheduleMissedTicks: ticks missed while no runner was up (older than
// the late window) are dropped under skip, and the latest of them runs
// once under latest; either way the schedule goes on from now.
func TestScheduleMissedTicks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		missed string
		runs   []string
	}{
		{spec.MissedSkip, nil},
		{spec.MissedLatest, []string{"cron.hourly.20261204T130000Z"}},
	} {
		t.Run(tc.missed, func(t *testing.T) {
			t.Parallel()
			b := schedSetup(t)
			ctx := t.Context()
			_, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "hourly", Cron: "0 * * * *", Missed: tc.missed, Run: oneNode()})
			require.NoError(t, err)
			b.at(time.Date(2026, 12, 4, 13, 30, 0, 0, time.UTC)) // 11:00, 12:00 and 13:00 missed
			var runs []string
			for _, f := range b.fire(t) {
				if f.Run != "" {
					runs = append(runs, f.Run)
				}
			}
			require.Equal(t, tc.runs, runs)
			st, err := b.c.Schedule(ctx, "hourly")
			require.NoError(t, err)
			require.Equal(t, time.Date(2026, 12, 4, 14, 0, 0, 0, time.UTC), st.Next.UTC())
		})
	}
}

// TestScheduleLateTicksCatchUp: ticks within the late window are each
// fired, in order, none skipped (a slow firer loses nothing).
func TestScheduleLateTicksCatchUp(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	_, _, err := b.c.PutSchedule(t.Context(), &spec.Schedule{Name: "sec", Cron: "*/10 * * * * *", Run: oneNode()})
	require.NoError(t, err)
	b.at(b.now.Add(35 * time.Second)) // 10:00:10, :20, :30 due
	var runs []string
	for _, f := range b.fire(t) {
		runs = append(runs, f.Run)
	}
	require.Equal(t, []string{"cron.sec.20261204T100010Z", "cron.sec.20261204T100020Z", "cron.sec.20261204T100030Z"}, runs)
}

// TestScheduleNeverOverlaps: a schedule on a thread with multitask reject
// skips a tick while its previous run is still running, and says so.
func TestScheduleNeverOverlaps(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	ctx := t.Context()
	_, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "sync", Cron: "* * * * *", Thread: "sync", Multitask: "reject", Run: oneNode()})
	require.NoError(t, err)
	b.at(time.Date(2026, 12, 4, 10, 1, 1, 0, time.UTC))
	first := b.fire(t)
	require.Len(t, first, 1)
	require.Equal(t, client.FiredCreated, first[0].Outcome)
	b.at(time.Date(2026, 12, 4, 10, 2, 1, 0, time.UTC)) // no runner ran the first: still RUNNING
	second := b.fire(t)
	require.Len(t, second, 1)
	require.Equal(t, client.FiredBusy, second[0].Outcome)
	st, err := b.c.Schedule(ctx, "sync")
	require.NoError(t, err)
	require.Equal(t, client.FiredBusy, st.Outcome)
	require.Equal(t, time.Date(2026, 12, 4, 10, 3, 0, 0, time.UTC), st.Next.UTC(), "the schedule goes on")
}

// TestScheduleBadInputStoresNothing: each bad field is named, and nothing
// is stored.
func TestScheduleBadInputStoresNothing(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	ctx := t.Context()
	for field, s := range map[string]*spec.Schedule{
		"cron":          {Name: "x", Cron: "*/5 * * *", Run: oneNode()},
		"tz":            {Name: "x", Cron: "* * * * *", TZ: "Mars/Olympus", Run: oneNode()},
		"name":          {Name: "a b", Cron: "* * * * *", Run: oneNode()},
		"missed":        {Name: "x", Cron: "* * * * *", Missed: "all", Run: oneNode()},
		"multitask":     {Name: "x", Cron: "* * * * *", Thread: "t", Multitask: "sometimes", Run: oneNode()},
		"run":           {Name: "x", Cron: "* * * * *"},
		"run.id":        {Name: "x", Cron: "* * * * *", Run: &spec.Run{ID: "r", Nodes: oneNode().Nodes}},
		"nodes[0].kind": {Name: "x", Cron: "* * * * *", Run: &spec.Run{Nodes: []spec.Node{{ID: "a"}}}},
	} {
		_, _, err := b.c.PutSchedule(ctx, s)
		require.ErrorIs(t, err, spec.ErrInvalid, field)
		var se *spec.Error
		require.True(t, errors.As(err, &se), field)
		require.Contains(t, err.Error(), field+":", field)
	}
	list, err := b.c.Schedules(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	require.Empty(t, b.mini.Keys(), "nothing stored")
}

// TestScheduleStoredSpecGoneBadIsReported: a schedule whose stored spec no
// longer validates is reported on the schedule and goes on ticking; the
// firer does not fail.
func TestScheduleStoredSpecGoneBadIsReported(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	ctx := t.Context()
	_, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "broken", Cron: "* * * * *", Run: oneNode()})
	require.NoError(t, err)
	key := b.c.Store().Keys().Schedule("broken")
	b.mini.HSet(key, "def", `{"name":"broken","cron":"* * * * *","run":{"nodes":[{"id":"a"}]}}`)
	b.at(time.Date(2026, 12, 4, 10, 1, 1, 0, time.UTC))
	fired := b.fire(t)
	require.Len(t, fired, 1)
	require.Equal(t, client.FiredProblem, fired[0].Outcome)
	st, err := b.c.Schedule(ctx, "broken")
	require.NoError(t, err)
	require.Contains(t, st.Error, "kind")
	require.Equal(t, time.Date(2026, 12, 4, 10, 2, 0, 0, time.UTC), st.Next.UTC(), "it goes on ticking")

	// An expression that no longer parses: reported, looked at again later.
	b.mini.HSet(key, "def", `{"name":"broken","cron":"nonsense","run":{"nodes":[{"id":"a","kind":"noop"}]}}`)
	b.at(time.Date(2026, 12, 4, 10, 2, 1, 0, time.UTC))
	fired = b.fire(t)
	require.Len(t, fired, 1)
	st, err = b.c.Schedule(ctx, "broken")
	require.NoError(t, err)
	require.Contains(t, st.Error, "cron")
	runs, err := b.c.List(ctx, "", 10)
	require.NoError(t, err)
	require.Empty(t, runs)

	require.NoError(t, b.c.DeleteSchedule(ctx, "broken"))
	require.ErrorIs(t, b.c.DeleteSchedule(ctx, "broken"), fence.ErrNotFound)
}

// TestScheduleNeverFiresOrUnknownZoneChangesNothing: a cron that never
// fires and a zone that does not exist are refused naming the field, and
// the schedule stored under that name stays as it was, byte for byte.
func TestScheduleNeverFiresOrUnknownZoneChangesNothing(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	ctx := t.Context()
	_, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "x", Cron: "0 3 * * *", TZ: "Europe/Paris", Run: oneNode()})
	require.NoError(t, err)
	key := b.c.Store().Keys().Schedule("x")
	before, err := b.mini.HKeys(key)
	require.NoError(t, err)
	stored := map[string]string{}
	for _, f := range before {
		stored[f] = b.mini.HGet(key, f)
	}
	for _, tc := range []struct{ cron, tz, field, msg string }{
		{"0 0 30 2 *", "", "cron", "never fires"},
		{"0 0 31 4,6,9,11 *", "America/New_York", "cron", "never fires"},
		{"0 0 0 30 2 *", "", "cron", "never fires"},
		{"0 3 * * *", "Europe/Pariss", "tz", "not a known IANA time zone"},
		{"0 3 * * *", "America/New_York ", "tz", "not a known IANA time zone"},
		{"0 3 * * *", "../../etc/passwd", "tz", "not a known IANA time zone"},
		{"0 3 * * *", "Local", "tz", "not a known IANA time zone"},
	} {
		_, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "x", Cron: tc.cron, TZ: tc.tz, Run: oneNode()})
		var se *spec.Error
		require.ErrorAs(t, err, &se, "%q %q", tc.cron, tc.tz)
		require.Equal(t, tc.field, se.Field, "%q %q", tc.cron, tc.tz)
		require.Contains(t, err.Error(), tc.field+": ", "%q %q", tc.cron, tc.tz)
		require.Contains(t, err.Error(), tc.msg, "%q %q", tc.cron, tc.tz)
	}
	after, err := b.mini.HKeys(key)
	require.NoError(t, err)
	require.Equal(t, before, after)
	for f, v := range stored {
		require.Equal(t, v, b.mini.HGet(key, f), "field %s unchanged", f)
	}
	require.ElementsMatch(t, []string{key, b.c.Store().Keys().Schedules()}, b.mini.Keys(), "no other key written")
}
