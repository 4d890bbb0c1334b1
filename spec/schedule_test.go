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
	require.Equal(t, time.Date(2026, 3, 28, 12, 5, 0, 0, time.UTC), mustCron(t, "*/5 * * * *", "").Next(at))
	require.Equal(t, time.Date(2026, 3, 28, 12, 0, 1, 0, time.UTC), mustCron(t, "* * * * * *", "").Next(at))
	require.Equal(t, time.Date(2026, 3, 28, 13, 0, 0, 0, time.UTC), mustCron(t, "@hourly", "").Next(at))
	// 03:00 in Paris: 02:00 UTC in winter, 01:00 UTC from 29 March 2026.
	paris := mustCron(t, "0 3 * * *", "Europe/Paris")
	require.Equal(t, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), paris.Next(at).UTC())
	require.Equal(t, time.Date(2026, 3, 28, 2, 0, 0, 0, time.UTC), paris.Next(at.Add(-24*time.Hour)).UTC())
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
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	_, due := sec.Step(t0.Add(time.Second), t0, time.Minute, "")
	require.False(t, due)
	st, due := sec.Step(t0, t0.Add(30*time.Second), time.Minute, "")
	require.True(t, due)
	require.Equal(t, Step{Fire: t0, Next: t0.Add(time.Second)}, st, "a late tick fires")

	// A day of every-second ticks missed: skip goes on from now - late.
	now := t0.Add(24*time.Hour + 300*time.Millisecond)
	st, _ = sec.Step(t0, now, time.Minute, MissedSkip)
	require.Equal(t, Step{Next: t0.Add(24*time.Hour - time.Minute + time.Second), Skipped: true}, st)
	st, _ = sec.Step(t0, now, time.Minute, MissedLatest)
	require.Equal(t, t0.Add(24*time.Hour-time.Minute), st.Fire, "the latest missed tick")
	require.Equal(t, t0.Add(24*time.Hour-time.Minute+time.Second), st.Next)

	monthly := mustCron(t, "0 0 1 * *", "")
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st, _ = monthly.Step(jan, time.Date(2026, 7, 15, 0, 0, 0, 0, time.UTC), time.Minute, MissedLatest)
	require.Equal(t, time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), st.Fire)
	require.Equal(t, time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC), st.Next)
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
