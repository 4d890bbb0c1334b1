package spec

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCronTicksMatchAMinuteByMinuteClock checks the ticks around every
// daylight-saving change of 2026 and 2027 (and the last midnight changes
// of zones that no longer change), in zones chosen for the ways
// they change (at midnight, by 30 minutes, by 2 hours, backwards in
// winter, twice a year for Ramadan), against a model that watches the
// zone's clock minute by minute, with no arithmetic of its own:
//
//   - a fixed expression's tick for wall-clock time c is due at the first
//     minute the clock shows c or later, once;
//   - a wildcard's ticks are every minute at which the clock shows a
//     matching time; a time the clock showed before is labelled in UTC.
func TestCronTicksMatchAMinuteByMinuteClock(t *testing.T) {
	t.Parallel()
	type window struct {
		zone     string
		from, to int // years, to excluded
	}
	var zones []window
	for _, z := range []string{
		"America/New_York", "America/Santiago", "America/Havana", "Asia/Beirut", "Africa/Cairo",
		"Atlantic/Azores", "America/Nuuk", "America/Scoresbysund", "Europe/London", "Europe/Paris",
		"Europe/Dublin", "Africa/Casablanca", "Asia/Jerusalem", "Australia/Lord_Howe", "Australia/Sydney",
		"Pacific/Auckland", "Pacific/Chatham", "America/St_Johns", "Antarctica/Troll",
	} {
		zones = append(zones, window{z, 2026, 2028})
	}
	// Midnight changes of zones that have stopped changing.
	zones = append(zones, window{"America/Asuncion", 2024, 2025}, window{"America/Sao_Paulo", 2018, 2019},
		window{"Asia/Tehran", 2021, 2022}, window{"Asia/Damascus", 2021, 2022}, window{"Asia/Amman", 2021, 2022})
	exprs := []string{
		"0 0 * * *", "30 2 * * *", "0,30 1,2 * * *", "15 23 * * *", "0 0-23 * * *", "45 0 * * 0",
		"0 * * * *", "*/20 * * * *", "*/10 0,1,2,23 * * *", "@hourly",
	}
	changes := 0
	for _, z := range zones {
		zone := z.zone
		from, to := time.Date(z.from, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(z.to, 1, 1, 0, 0, 0, 0, time.UTC)
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		for p := from; ; {
			_, end := p.In(loc).ZoneBounds()
			if end.IsZero() || !end.Before(to) {
				break
			}
			p = end
			changes++
			clock := watchClock(loc, end.Add(-26*time.Hour), end.Add(26*time.Hour))
			for _, expr := range exprs {
				ticks := mustCron(t, expr, zone)
				lo, hi := end.Add(-20*time.Hour), end.Add(20*time.Hour)
				var got []tickAt
				for tk := ticks.After(lo.Add(-time.Nanosecond)); !tk.IsZero() && !tk.At.After(hi); tk = ticks.Next(tk) {
					got = append(got, tickAt{tk.Label, tk.At.UTC().Format(time.RFC3339)})
				}
				want := clock.ticks(ticks, lo, hi)
				require.Equal(t, want, got, fmt.Sprintf("%s in %s around %s", expr, zone, end.UTC()))
			}
		}
	}
	require.Greater(t, changes, 80, "changes checked")
}

// clockModel is a zone's clock read every minute over a window: at[i] is
// the instant, wall[i] what the clock showed (written as UTC).
type clockModel struct {
	at, wall []time.Time
}

func watchClock(loc *time.Location, from, to time.Time) clockModel {
	var c clockModel
	for u := from; u.Before(to); u = u.Add(time.Minute) {
		l := u.In(loc)
		y, mo, d := l.Date()
		h, mi, s := l.Clock()
		c.at = append(c.at, u)
		c.wall = append(c.wall, time.Date(y, mo, d, h, mi, s, 0, time.UTC))
	}
	return c
}

// ticks is what the model says ticks are due in [lo, hi]. Whether a wall
// time matches the expression is robfig/cron's matching (the parser's),
// asked as "is w the next match after w minus a second".
func (c clockModel) ticks(tk Ticks, lo, hi time.Time) []tickAt {
	matches := func(w time.Time) bool { return tk.wall.Next(w.Add(-time.Second)).Equal(w) }
	var out []tickAt
	add := func(label string, u time.Time) {
		if !u.Before(lo) && !u.After(hi) {
			out = append(out, tickAt{label, u.UTC().Format(time.RFC3339)})
		}
	}
	if tk.Kind() == TicksWildcard {
		seen := map[time.Time]bool{}
		for i, w := range c.wall {
			if matches(w) {
				if seen[w] {
					add(c.at[i].UTC().Format(utcLayout), c.at[i])
				} else {
					add(w.Format(wallLayout), c.at[i])
				}
			}
			seen[w] = true
		}
		return out
	}
	// Fixed: each wall time c is due at the first minute the clock shows c
	// or later; the clock's high-water mark says which are newly reached.
	high := c.wall[0]
	for i, w := range c.wall[1:] {
		if !w.After(high) {
			continue
		}
		for m := high.Add(time.Minute); !m.After(w); m = m.Add(time.Minute) {
			if matches(m) {
				add(m.Format(wallLayout), c.at[i+1])
			}
		}
		high = w
	}
	return out
}
