package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustCron(t *testing.T, expr, tz string) Ticks {
	t.Helper()
	ticks, err := ParseCron(expr, tz)
	require.NoError(t, err)
	return ticks
}

// TestCronTicks: five fields, six with seconds, descriptors, and a time
// zone with its daylight-saving change.
func TestCronTicks(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 28, 12, 0, 0, 500e6, time.UTC)
	require.Equal(t, time.Date(2026, 3, 28, 12, 5, 0, 0, time.UTC), mustCron(t, "*/5 * * * *", "").After(at).At)
	require.Equal(t, time.Date(2026, 3, 28, 12, 0, 1, 0, time.UTC), mustCron(t, "* * * * * *", "").After(at).At)
	require.Equal(t, time.Date(2026, 3, 28, 13, 0, 0, 0, time.UTC), mustCron(t, "@hourly", "").After(at).At)
	// 03:00 in Paris: 02:00 UTC in winter, 01:00 UTC from 29 March 2026.
	paris := mustCron(t, "0 3 * * *", "Europe/Paris")
	require.Equal(t, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), paris.After(at).At.UTC())
	require.Equal(t, time.Date(2026, 3, 28, 2, 0, 0, 0, time.UTC), paris.After(at.Add(-24*time.Hour)).At.UTC())
}

// TestCronBadInputNamesTheField: what does not parse says which field.
func TestCronBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, tz, field string }{
		{"*/5 * * *", "", "cron"},
		{"61 * * * *", "", "cron"},
		{"", "", "cron"},
		{"CRON_TZ=Asia/Tokyo * * * * *", "", "cron"},
		{"0 0 30 2 *", "", "cron"}, // never fires
		{"* * * * *", "Mars/Olympus", "tz"},
		{"* * * * *", "Local", "tz"},
	} {
		_, err := ParseCron(tc.expr, tc.tz)
		var se *Error
		require.ErrorAs(t, err, &se, "%q %q", tc.expr, tc.tz)
		require.Equal(t, tc.field, se.Field, "%q %q", tc.expr, tc.tz)
	}
}

// TestStepMissedAndLate: late ticks fire in order; missed ones are
// skipped, or the latest fires once.
func TestStepMissedAndLate(t *testing.T) {
	t.Parallel()
	sec := mustCron(t, "* * * * * *", "")
	at := func(u time.Time) Tick { return sec.TickAt(u) }
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	_, due := sec.Step(at(t0.Add(time.Second)), t0, time.Minute, "")
	require.False(t, due)
	st, due := sec.Step(at(t0), t0.Add(30*time.Second), time.Minute, "")
	require.True(t, due)
	require.Equal(t, Step{Fire: at(t0), Next: at(t0.Add(time.Second))}, st, "a late tick fires")

	// A day of every-second ticks missed: skip goes on from now - late.
	now := t0.Add(24*time.Hour + 300*time.Millisecond)
	st, _ = sec.Step(at(t0), now, time.Minute, MissedSkip)
	require.Equal(t, Step{Next: at(t0.Add(24*time.Hour - time.Minute + time.Second)), Skipped: true}, st)
	st, _ = sec.Step(at(t0), now, time.Minute, MissedLatest)
	require.Equal(t, at(t0.Add(24*time.Hour-time.Minute)), st.Fire, "the latest missed tick")
	require.Equal(t, at(t0.Add(24*time.Hour-time.Minute+time.Second)), st.Next)

	monthly := mustCron(t, "0 0 1 * *", "")
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st, _ = monthly.Step(monthly.TickAt(jan), time.Date(2026, 7, 15, 0, 0, 0, 0, time.UTC), time.Minute, MissedLatest)
	require.Equal(t, time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), st.Fire.At)
	require.Equal(t, time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC), st.Next.At)

	// In a zone, missed ticks are wall-clock ticks too: New York's
	// fall-back night, runners down from 00:00 to 08:00 EST.
	ny := mustCron(t, "*/30 * * * *", "America/New_York")
	from := ny.After(time.Date(2026, 11, 1, 3, 59, 0, 0, time.UTC))
	st, _ = ny.Step(from, time.Date(2026, 11, 1, 13, 0, 0, 0, time.UTC), time.Minute, MissedLatest)
	require.Equal(t, "20261101T073000", st.Fire.Label)
	require.Equal(t, "20261101T080000", st.Next.Label)
}

// TestRunIDIsAnIDPerTick: the tick's run id is the same for every firer,
// differs per second, and stays an id at the longest name.
func TestRunIDIsAnIDPerTick(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 12, 4, 11, 0, 5, 0, time.FixedZone("x", 3600))
	require.Equal(t, "cron.n.20261204T100005Z", RunID("n", tick))
	long := make([]byte, MaxScheduleName)
	for i := range long {
		long[i] = 'a'
	}
	s := &Schedule{Name: string(long), Cron: "* * * * *", Run: &Run{Nodes: []Node{{ID: "a", Kind: "noop"}}}}
	require.NoError(t, s.Validate(Limits{}))
	s.Name += "a"
	require.ErrorContains(t, s.Validate(Limits{}), "name: ")
}
