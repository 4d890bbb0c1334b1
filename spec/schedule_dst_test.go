package spec

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tickAt is a wanted tick: its label and when it is due (UTC, RFC 3339).
type tickAt struct{ label, at string }

func ticksFrom(t *testing.T, expr, tz string, from time.Time, n int) []tickAt {
	t.Helper()
	ticks := mustCron(t, expr, tz)
	var out []tickAt
	tk := ticks.After(from)
	for range n {
		require.False(t, tk.IsZero())
		out = append(out, tickAt{tk.Label, tk.At.UTC().Format(time.RFC3339)})
		tk = ticks.Next(tk)
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestCronWallClockTicksAcrossDST: the ticks of fixed and wildcard
// expressions across daylight-saving changes, in New York (changes at
// 02:00) and in zones whose change is at midnight, as the rule in
// docs/schedules.md gives them (worked out by hand from the zones' rules,
// not by the code under test):
//
//   - New York: spring-forward 2026-03-08 02:00 EST -> 03:00 EDT
//     (07:00Z); fall-back 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z).
//   - America/Santiago: spring 2026-09-06 00:00 -04 -> 01:00 -03 (04:00Z);
//     fall 2026-04-05 00:00 -03 -> 2026-04-04 23:00 -04 (03:00Z).
//   - America/Havana: spring 2026-03-08 00:00 CST -> 01:00 CDT (05:00Z);
//     fall 2026-11-01 01:00 CDT -> 00:00 CST (05:00Z).
//   - Asia/Beirut: spring 2026-03-29 00:00 EET -> 01:00 EEST
//     (2026-03-28T22:00Z).
//   - Africa/Cairo: spring 2026-04-24 00:00 EET -> 01:00 EEST
//     (2026-04-23T22:00Z).
//   - America/Asuncion: spring 2024-10-06 00:00 -04 -> 01:00 -03 (04:00Z),
//     its last change: Paraguay kept -03 from 2024-10-15.
func TestCronWallClockTicksAcrossDST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, expr, tz, from string
		want                 []tickAt
	}{
		{"NY fall-back daily 01:30 fires once", "30 1 * * *", "America/New_York", "2026-10-31T00:00:00Z", []tickAt{
			{"20261031T013000", "2026-10-31T05:30:00Z"},
			{"20261101T013000", "2026-11-01T05:30:00Z"}, // the first 01:30 (EDT); not again at 06:30Z
			{"20261102T013000", "2026-11-02T06:30:00Z"},
		}},
		{"NY spring-forward daily 02:30 fires at the change", "30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z", []tickAt{
			{"20260307T023000", "2026-03-07T07:30:00Z"},
			{"20260308T023000", "2026-03-08T07:00:00Z"},
			{"20260309T023000", "2026-03-09T06:30:00Z"},
		}},
		{"NY two ticks in the skipped hour", "0,30 2,3 * * *", "America/New_York", "2026-03-08T06:00:00Z", []tickAt{
			{"20260308T020000", "2026-03-08T07:00:00Z"},
			{"20260308T023000", "2026-03-08T07:00:00Z"},
			{"20260308T030000", "2026-03-08T07:00:00Z"},
			{"20260308T033000", "2026-03-08T07:30:00Z"},
		}},
		{"NY fall-back wildcard hour fires both passes", "30 * * * *", "America/New_York", "2026-11-01T04:00:00Z", []tickAt{
			{"20261101T003000", "2026-11-01T04:30:00Z"},
			{"20261101T013000", "2026-11-01T05:30:00Z"},
			{"20261101T063000Z", "2026-11-01T06:30:00Z"}, // 01:30 EST, the second pass
			{"20261101T023000", "2026-11-01T07:30:00Z"},
		}},
		{"NY spring-forward wildcard hour skips the hour", "30 * * * *", "America/New_York", "2026-03-08T05:00:00Z", []tickAt{
			{"20260308T003000", "2026-03-08T05:30:00Z"},
			{"20260308T013000", "2026-03-08T06:30:00Z"},
			{"20260308T033000", "2026-03-08T07:30:00Z"},
		}},
		{"NY @hourly on fall-back: 25 hours, each once", "@hourly", "America/New_York", "2026-11-01T05:59:00Z", []tickAt{
			{"20261101T060000Z", "2026-11-01T06:00:00Z"}, // 01:00 EST, the clock's second 01:00
			{"20261101T020000", "2026-11-01T07:00:00Z"},
		}},
		{"Santiago midnight skipped", "0 0 * * *", "America/Santiago", "2026-09-05T00:00:00Z", []tickAt{
			{"20260905T000000", "2026-09-05T04:00:00Z"},
			{"20260906T000000", "2026-09-06T04:00:00Z"}, // at the change: 01:00 -03
			{"20260907T000000", "2026-09-07T03:00:00Z"},
		}},
		{"Santiago fall-back repeats 23:xx, fixed once", "30 23 * * *", "America/Santiago", "2026-04-04T12:00:00Z", []tickAt{
			{"20260404T233000", "2026-04-05T02:30:00Z"},
			{"20260405T233000", "2026-04-06T03:30:00Z"},
		}},
		{"Santiago fall-back wildcard both passes", "*/30 * * * *", "America/Santiago", "2026-04-05T01:59:00Z", []tickAt{
			{"20260404T230000", "2026-04-05T02:00:00Z"},
			{"20260404T233000", "2026-04-05T02:30:00Z"},
			{"20260405T030000Z", "2026-04-05T03:00:00Z"},
			{"20260405T033000Z", "2026-04-05T03:30:00Z"},
			{"20260405T000000", "2026-04-05T04:00:00Z"},
		}},
		{"Havana midnight skipped", "0 0 * * *", "America/Havana", "2026-03-07T00:00:00Z", []tickAt{
			{"20260307T000000", "2026-03-07T05:00:00Z"},
			{"20260308T000000", "2026-03-08T05:00:00Z"},
			{"20260309T000000", "2026-03-09T04:00:00Z"},
		}},
		{"Havana midnight repeated, fixed once", "0 0 * * *", "America/Havana", "2026-10-31T00:00:00Z", []tickAt{
			{"20261031T000000", "2026-10-31T04:00:00Z"},
			{"20261101T000000", "2026-11-01T04:00:00Z"},
			{"20261102T000000", "2026-11-02T05:00:00Z"},
		}},
		{"Havana hourly skips midnight", "0 * * * *", "America/Havana", "2026-03-08T03:30:00Z", []tickAt{
			{"20260307T230000", "2026-03-08T04:00:00Z"},
			{"20260308T010000", "2026-03-08T05:00:00Z"},
			{"20260308T020000", "2026-03-08T06:00:00Z"},
		}},
		{"Beirut midnight skipped", "0 0 * * *", "Asia/Beirut", "2026-03-27T00:00:00Z", []tickAt{
			{"20260328T000000", "2026-03-27T22:00:00Z"},
			{"20260329T000000", "2026-03-28T22:00:00Z"},
			{"20260330T000000", "2026-03-29T21:00:00Z"},
		}},
		{"Cairo midnight skipped", "0 0 * * *", "Africa/Cairo", "2026-04-23T00:00:00Z", []tickAt{
			{"20260424T000000", "2026-04-23T22:00:00Z"},
			{"20260425T000000", "2026-04-24T21:00:00Z"},
		}},
		{"Asuncion midnight skipped, 2024", "0 0 * * *", "America/Asuncion", "2024-10-05T00:00:00Z", []tickAt{
			{"20241005T000000", "2024-10-05T04:00:00Z"},
			{"20241006T000000", "2024-10-06T04:00:00Z"},
			{"20241007T000000", "2024-10-07T03:00:00Z"},
		}},
		{"UTC keeps its Z labels", "0 3 * * *", "", "2026-03-08T00:00:00Z", []tickAt{
			{"20260308T030000Z", "2026-03-08T03:00:00Z"},
		}},
		{"@every is elapsed time", "@every 90m", "America/New_York", "2026-11-01T05:00:00Z", []tickAt{
			{"20261101T063000Z", "2026-11-01T06:30:00Z"},
			{"20261101T080000Z", "2026-11-01T08:00:00Z"},
		}},
	} {
		got := ticksFrom(t, tc.expr, tc.tz, utc(tc.from), len(tc.want))
		require.Equal(t, tc.want, got, tc.name)
	}
}

// TestCronStepFallBackFiresOnce: a firer stepping a daily 01:30 New York
// schedule through the fall-back night fires the tick once, and the
// second 01:30 finds nothing due.
func TestCronStepFallBackFiresOnce(t *testing.T) {
	t.Parallel()
	ticks := mustCron(t, "30 1 * * *", "America/New_York")
	next := ticks.After(utc("2026-11-01T04:00:00Z"))
	var fired []string
	for now := utc("2026-11-01T04:00:00Z"); now.Before(utc("2026-11-01T09:00:00Z")); now = now.Add(time.Minute) {
		st, due := ticks.Step(next, now, time.Minute, MissedSkip)
		if due {
			fired = append(fired, st.Fire.Label)
			next = st.Next
		}
	}
	require.Equal(t, []string{"20261101T013000"}, fired)
	require.Equal(t, tickAt{"20261102T013000", "2026-11-02T06:30:00Z"}, tickAt{next.Label, next.At.UTC().Format(time.RFC3339)})

	// A schedule stored with an instant only (an earlier version) gets its
	// label from the wall clock.
	require.Equal(t, "20261101T013000", ticks.TickAt(utc("2026-11-01T05:30:00Z")).Label)
}

// systemdCase is one expression compared with systemd's calendar
// events: the same times in both syntaxes.
type systemdCase struct {
	expr, calendar, tz, from string
	n                        int
	// extra is how many of baton's ticks systemd does not have: the rule
	// differs there (see TestCronAgainstSystemd).
	extra int
}

// TestCronAgainstSystemd compares the ticks with systemd's timers
// (systemd-analyze calendar --iterations), the reference on this
// machine, across daylight-saving changes. systemd places a fall-back
// time at its first pass, and a wildcard on elapsed time, as baton does;
// it differs on two points, where baton follows vixie cron, and the test
// checks that each tick systemd lacks is one of these:
//
//   - a fixed time the clock skips: systemd does not fire it; baton fires
//     it at the change;
//   - a wildcard's second pass through a repeated hour: systemd fires a
//     wall-clock time once; baton fires it again (labelled in UTC).
//
// Every tick systemd has, baton has at the same instant. Skipped when
// systemd-analyze is not installed; TestCronWallClockTicksAcrossDST
// checks the same rule against a table.
func TestCronAgainstSystemd(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed")
	}
	for _, tc := range []systemdCase{
		{"30 1 * * *", "*-*-* 01:30:00", "America/New_York", "2026-10-30T00:00:00Z", 5, 0},
		{"30 2 * * *", "*-*-* 02:30:00", "America/New_York", "2026-03-06T00:00:00Z", 5, 1},
		{"30 * * * *", "*-*-* *:30:00", "America/New_York", "2026-11-01T00:00:00Z", 12, 1},
		{"30 * * * *", "*-*-* *:30:00", "America/New_York", "2026-03-08T00:00:00Z", 12, 0},
		{"*/15 * * * *", "*-*-* *:0/15:00", "America/New_York", "2026-11-01T04:50:00Z", 12, 4},
		{"0 0 * * *", "*-*-* 00:00:00", "America/Santiago", "2026-09-04T00:00:00Z", 5, 1},
		{"0 0 * * *", "*-*-* 00:00:00", "America/Santiago", "2026-04-03T00:00:00Z", 5, 0},
		{"0 * * * *", "*-*-* *:00:00", "America/Santiago", "2026-04-04T22:00:00Z", 10, 1},
		{"0 0 * * *", "*-*-* 00:00:00", "America/Havana", "2026-03-06T00:00:00Z", 5, 1},
		{"0 0 * * *", "*-*-* 00:00:00", "America/Havana", "2026-10-30T00:00:00Z", 5, 0},
		{"0 * * * *", "*-*-* *:00:00", "America/Havana", "2026-11-01T02:00:00Z", 6, 1},
		{"0 0 * * *", "*-*-* 00:00:00", "Asia/Beirut", "2026-03-27T00:00:00Z", 5, 1},
		{"0 0 * * *", "*-*-* 00:00:00", "Asia/Beirut", "2026-10-23T00:00:00Z", 5, 0},
		{"0 0 * * *", "*-*-* 00:00:00", "Africa/Cairo", "2026-04-22T00:00:00Z", 5, 1},
		{"0 0 * * *", "*-*-* 00:00:00", "Africa/Cairo", "2026-10-28T00:00:00Z", 5, 0},
		{"0 0 * * *", "*-*-* 00:00:00", "America/Asuncion", "2024-10-04T00:00:00Z", 5, 1},
		{"0 0 * * *", "*-*-* 00:00:00", "Atlantic/Azores", "2026-03-27T00:00:00Z", 5, 1},
		{"15 0 * * 0", "Sun *-*-* 00:15:00", "America/Havana", "2026-03-01T00:00:00Z", 3, 1},
	} {
		name := fmt.Sprintf("%s %s from %s", tc.expr, tc.tz, tc.from)
		want := systemdTicks(t, tc.calendar, tc.tz, utc(tc.from), tc.n)
		ticks := mustCron(t, tc.expr, tc.tz)
		extra := 0
		got := map[string]bool{}
		for tk := ticks.After(utc(tc.from)); !tk.At.After(want[len(want)-1]); tk = ticks.Next(tk) {
			got[tk.At.UTC().Format(time.RFC3339)] = true
			shown, _, gap := ticks.instants(ticks.wallOf(tk))
			switch {
			case contains(want, tk.At):
			case ticks.Kind() == TicksFixed && shown.IsZero() && tk.At.Equal(gap):
				extra++ // a skipped fixed time, fired at the change
			case ticks.Kind() == TicksWildcard && strings.HasSuffix(tk.Label, "Z"):
				extra++ // a wildcard's second pass
			default:
				t.Errorf("%s: tick %s at %s is not one of systemd's %v", name, tk.Label, tk.At.UTC(), want)
			}
		}
		for _, w := range want {
			require.True(t, got[w.Format(time.RFC3339)], "%s: systemd's %s is not a tick", name, w)
		}
		require.Equal(t, tc.extra, extra, "%s: ticks systemd lacks", name)
	}
}

func contains(ts []time.Time, u time.Time) bool {
	for _, t := range ts {
		if t.Equal(u) {
			return true
		}
	}
	return false
}

// systemdTicks asks systemd-analyze for the next n elapses of calendar in
// zone tz after from.
func systemdTicks(t *testing.T, calendar, tz string, from time.Time, n int) []time.Time {
	t.Helper()
	cmd := exec.Command("systemd-analyze", "calendar", fmt.Sprintf("--iterations=%d", n),
		"--base-time="+from.UTC().Format("2006-01-02 15:04:05")+" UTC", calendar)
	cmd.Env = append(cmd.Environ(), "TZ="+tz, "LC_ALL=C", "SYSTEMD_COLORS=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var ts []time.Time
	for line := range strings.Lines(string(out)) {
		_, v, ok := strings.Cut(line, "(in UTC): ")
		if !ok {
			continue
		}
		u, err := time.Parse("Mon 2006-01-02 15:04:05 MST", strings.TrimSpace(v))
		require.NoError(t, err, line)
		ts = append(ts, u)
	}
	require.Len(t, ts, n, "%s", out)
	return ts
}
