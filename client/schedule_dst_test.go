package client_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/spec"
)

// firedBetween puts schedule name (expr in tz) at from and lets two
// firers (two runners' clients) take turns stepping Redis's clock a
// minute at a time until to. It returns the runs stored, by id, and when
// each was created, as the first firer to submit it saw Redis's clock.
func firedBetween(t *testing.T, name, expr, tz string, from, to time.Time) (runs []string, at map[string]time.Time) {
	t.Helper()
	b := schedSetup(t)
	ctx := t.Context()
	b.at(from)
	_, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: name, Cron: expr, TZ: tz, Run: oneNode()})
	require.NoError(t, err)
	other, err := client.New(client.Config{Redis: b.c.Store().Redis()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	at = map[string]time.Time{}
	for i, now := 0, from; !now.After(to); i, now = i+1, now.Add(time.Minute) {
		b.at(now)
		for _, c := range []*client.Client{b.c, other}[i%2:] { // both fire, the first in turn
			out, err := c.FireDue(ctx, time.Minute)
			require.NoError(t, err)
			for _, f := range out {
				if f.Outcome == client.FiredCreated {
					at[f.Run] = now
				}
			}
		}
	}
	list, err := b.c.List(ctx, "", 1000)
	require.NoError(t, err)
	for _, r := range list {
		if strings.HasPrefix(r.ID, "cron."+name+".") {
			runs = append(runs, r.ID)
		}
	}
	slices.Sort(runs)
	return runs, at
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestScheduleFallBackTickFiresOnce: a daily 01:30 in New York on the
// fall-back day (2026-11-01: 02:00 EDT -> 01:00 EST at 06:00Z), fired by
// two runners: one run, at the first 01:30 (05:30Z), named for the
// wall-clock tick; the second 01:30 (06:30Z) fires nothing.
func TestScheduleFallBackTickFiresOnce(t *testing.T) {
	t.Parallel()
	runs, when := firedBetween(t, "fb", "30 1 * * *", "America/New_York",
		at("2026-11-01T04:00:00Z"), at("2026-11-01T09:00:00Z"))
	require.Equal(t, []string{"cron.fb.20261101T013000"}, runs)
	require.Equal(t, at("2026-11-01T05:30:00Z"), when["cron.fb.20261101T013000"])
}

// TestScheduleWildcardHourOnFallBack: an hourly expression follows
// elapsed time, as vixie cron's wildcard jobs do: on the fall-back day
// 01:30 fires in both passes, the second named by its UTC time.
func TestScheduleWildcardHourOnFallBack(t *testing.T) {
	t.Parallel()
	runs, _ := firedBetween(t, "hourly", "30 * * * *", "America/New_York",
		at("2026-11-01T04:00:00Z"), at("2026-11-01T08:00:00Z"))
	require.Equal(t, []string{"cron.hourly.20261101T003000", "cron.hourly.20261101T013000",
		"cron.hourly.20261101T023000", "cron.hourly.20261101T063000Z"}, runs)
}

// TestScheduleSkippedTickFiresAtTheChange: a tick in the hour (or at the
// midnight) that a spring-forward skips fires that day, at the change,
// once: New York's 02:30, and midnight in the zones whose change is at
// midnight (dates from Go's tzdata; Asuncion's last change was 2024).
func TestScheduleSkippedTickFiresAtTheChange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr, tz, change, run string
	}{
		{"30 2 * * *", "America/New_York", "2026-03-08T07:00:00Z", "cron.s.20260308T023000"},
		{"0 0 * * *", "America/Santiago", "2026-09-06T04:00:00Z", "cron.s.20260906T000000"},
		{"0 0 * * *", "America/Havana", "2026-03-08T05:00:00Z", "cron.s.20260308T000000"},
		{"0 0 * * *", "Asia/Beirut", "2026-03-28T22:00:00Z", "cron.s.20260329T000000"},
		{"0 0 * * *", "Africa/Cairo", "2026-04-23T22:00:00Z", "cron.s.20260424T000000"},
		{"0 0 * * *", "America/Asuncion", "2024-10-06T04:00:00Z", "cron.s.20241006T000000"},
		{"0 0 * * *", "Atlantic/Azores", "2026-03-29T01:00:00Z", "cron.s.20260329T000000"},
	} {
		t.Run(tc.tz, func(t *testing.T) {
			t.Parallel()
			change := at(tc.change)
			runs, when := firedBetween(t, "s", tc.expr, tc.tz, change.Add(-90*time.Minute), change.Add(90*time.Minute))
			require.Equal(t, []string{tc.run}, runs)
			require.Equal(t, change, when[tc.run], "fired at the change")
		})
	}
}

// TestScheduleMidnightRepeatedFiresOnce: where the fall-back repeats
// midnight (Havana 2026-11-01, 01:00 CDT -> 00:00 CST at 05:00Z), a
// daily midnight fires once, at the first.
func TestScheduleMidnightRepeatedFiresOnce(t *testing.T) {
	t.Parallel()
	runs, when := firedBetween(t, "m", "0 0 * * *", "America/Havana",
		at("2026-11-01T03:00:00Z"), at("2026-11-01T07:00:00Z"))
	require.Equal(t, []string{"cron.m.20261101T000000"}, runs)
	require.Equal(t, at("2026-11-01T04:00:00Z"), when["cron.m.20261101T000000"])
}

// TestScheduleRunIDIsTheWallClockTick: the next run's id is shown before
// it fires, and a schedule stored by an earlier version (a due time and
// no label) fires under the wall-clock label of that time, the one every
// runner derives.
func TestScheduleRunIDIsTheWallClockTick(t *testing.T) {
	t.Parallel()
	b := schedSetup(t)
	ctx := t.Context()
	b.at(at("2026-10-31T12:00:00Z"))
	st, _, err := b.c.PutSchedule(ctx, &spec.Schedule{Name: "n", Cron: "30 1 * * *", TZ: "America/New_York", Run: oneNode()})
	require.NoError(t, err)
	require.Equal(t, "cron.n.20261101T013000", st.NextRun)
	require.Equal(t, at("2026-11-01T05:30:00Z"), st.Next.UTC())

	b.mini.HDel(b.c.Store().Keys().Schedule("n"), "tick")
	b.at(at("2026-11-01T05:30:10Z"))
	fired := b.fire(t)
	require.Len(t, fired, 1)
	require.Equal(t, "cron.n.20261101T013000", fired[0].Run)
	st, err = b.c.Schedule(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, "cron.n.20261102T013000", st.NextRun)
	b.at(at("2026-11-01T06:30:10Z"))
	require.Empty(t, b.fire(t), "the second 01:30 is not a tick")
}
