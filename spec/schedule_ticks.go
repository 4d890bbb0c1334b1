package spec

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Tick is one tick of a schedule: the wall-clock time it names, which
// names its run (cron.NAME.LABEL), and the instant it is due.
type Tick struct {
	// Label is the tick's wall-clock time in the schedule's zone, to the
	// second ("20261101T013000"). It ends in Z when it is a UTC time
	// instead: in a schedule read in UTC, in an @every schedule, and for
	// the second pass through a repeated (fall-back) hour, which only a
	// wildcard expression fires.
	Label string
	// At is when the tick is due: the first moment the zone's clock shows
	// that time, or, for a time the clock skipped, the change that skipped
	// it.
	At time.Time
}

// IsZero says there is no tick (an expression that never fires again).
func (t Tick) IsZero() bool { return t.At.IsZero() }

const (
	wallLayout = "20060102T150405"
	utcLayout  = "20060102T150405Z"
)

// Ticks is a schedule's cron expression read in its time zone: the ticks
// it fires. The expression names wall-clock times, so the arithmetic is
// done on the wall clock (the expression read in UTC, which has no
// daylight saving) and each time is then placed in the zone, by one of
// two rules, as vixie cron does:
//
//   - fixed (no seconds, minute or hour field starts with *: "30 1 * * *",
//     "0 0 * * *", "0 9-17 * * 1-5"): each wall-clock time fires once. A
//     time the clock shows twice (fall-back) fires the first time; a time
//     it skips (spring-forward) fires at the change.
//   - wildcard ("*/5 * * * *", "0 * * * *", "@hourly", "* 2 * * *"): fires
//     whenever the clock shows a matching time, on elapsed time: twice in a
//     repeated hour, not at all in a skipped one.
//
// @every schedules are elapsed time, with no zone.
type Ticks struct {
	every cron.Schedule      // @every; nil for a cron expression
	wall  *cron.SpecSchedule // the expression read in UTC: wall-clock arithmetic
	loc   *time.Location
	utc   bool // labels end in Z: the zone is UTC
	wild  bool
}

// wildcard says whether expr is a wildcard expression (Ticks): a seconds,
// minute or hour field that starts with * or ?, as vixie cron's MIN_STAR
// and HR_STAR, or @hourly.
func wildcard(expr string) bool {
	f := strings.Fields(expr)
	switch {
	case len(f) == 1 && strings.HasPrefix(f[0], "@"):
		return f[0] == "@hourly"
	case len(f) == 6: // seconds first
		f = f[:3]
	case len(f) >= 2:
		f = f[:2]
	}
	for _, x := range f {
		if strings.HasPrefix(x, "*") || strings.HasPrefix(x, "?") {
			return true
		}
	}
	return false
}

func newTicks(s cron.Schedule, loc *time.Location, tz, expr string) (Ticks, error) {
	t := Ticks{loc: loc, utc: tz == "" || tz == "UTC"}
	switch c := s.(type) {
	case *cron.SpecSchedule:
		w := *c
		w.Location = time.UTC
		t.wall, t.wild = &w, wildcard(expr)
	case cron.ConstantDelaySchedule:
		t.every, t.utc = c, true
	default:
		return Ticks{}, fmt.Errorf("unknown schedule %T", s)
	}
	return t, nil
}

// Expression kinds (Ticks.Kind).
const (
	TicksFixed    = "fixed"
	TicksWildcard = "wildcard"
	TicksEvery    = "every"
)

// Kind says which rule places the ticks in the zone: TicksFixed,
// TicksWildcard or TicksEvery.
func (t Ticks) Kind() string {
	switch {
	case t.every != nil:
		return TicksEvery
	case t.wild:
		return TicksWildcard
	}
	return TicksFixed
}

// After returns the first tick due strictly after u; zero if there is
// none within five years (an expression such as "0 0 30 2 *").
func (t Ticks) After(u time.Time) Tick {
	switch {
	case t.every != nil:
		return t.utcTick(t.every.Next(u))
	case t.utc:
		return t.utcTick(t.wall.Next(u))
	case t.wild:
		return t.wildAfter(u)
	}
	return t.fixedTick(t.wall.Next(t.maxWall(u)))
}

// Next returns the tick after tk in the schedule's order (zero if none):
// the next wall-clock time for a fixed expression, which may be due at
// the same instant (two times in one skipped hour), the next instant
// otherwise.
func (t Ticks) Next(tk Tick) Tick {
	if t.every != nil || t.wild || t.utc {
		return t.After(tk.At)
	}
	return t.fixedTick(t.wall.Next(t.wallOf(tk)))
}

// TickAt is the tick due at u, for a schedule stored with an instant and
// no label (by an earlier version).
func (t Ticks) TickAt(u time.Time) Tick {
	switch {
	case t.every != nil || t.utc:
		return t.utcTick(u)
	case t.wild:
		return t.wildTick(u, t.wallAt(u))
	}
	return t.fixedTick(t.wallAt(u))
}

func (t Ticks) utcTick(u time.Time) Tick {
	if u.IsZero() {
		return Tick{}
	}
	return Tick{Label: u.UTC().Format(utcLayout), At: u}
}

// wallAt is the zone's wall clock at u, written as a UTC time.
func (t Ticks) wallAt(u time.Time) time.Time {
	_, off := u.In(t.loc).Zone()
	return u.UTC().Add(time.Duration(off) * time.Second)
}

// wallOf is the wall-clock time tk names.
func (t Ticks) wallOf(tk Tick) time.Time {
	if w, err := time.Parse(wallLayout, tk.Label); err == nil {
		return w
	}
	return t.wallAt(tk.At)
}

// fixedTick places the wall-clock time w (a fixed expression's) in the
// zone: due at the first instant the clock shows w, or at the change that
// skipped it.
func (t Ticks) fixedTick(w time.Time) Tick {
	if w.IsZero() {
		return Tick{}
	}
	at, _, gap := t.instants(w)
	if at.IsZero() {
		at = gap
	}
	if at.IsZero() { // not reached: a time is shown or skipped
		_, off := w.In(t.loc).Zone()
		at = w.Add(-time.Duration(off) * time.Second)
	}
	return Tick{Label: w.Format(wallLayout), At: at}
}

// wildTick labels the instant u, at which the clock shows w: the wall
// time, or u in UTC on the clock's second pass through w.
func (t Ticks) wildTick(u, w time.Time) Tick {
	if first, _, _ := t.instants(w); !first.IsZero() && first.Before(u) {
		return t.utcTick(u)
	}
	return Tick{Label: w.Format(wallLayout), At: u}
}

// instants returns when the zone's clock shows w: first (and second, on
// a repeated hour's second pass), or, when it never does, gap, the change
// that skipped it.
func (t Ticks) instants(w time.Time) (first, second, gap time.Time) {
	// Offsets stay within a day, so every instant showing w, and every
	// change skipping it, is within a day and a few hours of w.
	p, end := w.Add(-27*time.Hour), w.Add(27*time.Hour)
	prevOff, started := 0, false
	for p.Before(end) {
		l := p.In(t.loc)
		_, off := l.Zone()
		start, stop := l.ZoneBounds()
		if started && off > prevOff && !w.Before(p.Add(time.Duration(prevOff)*time.Second)) &&
			w.Before(p.Add(time.Duration(off)*time.Second)) && gap.IsZero() {
			gap = p
		}
		u := w.Add(-time.Duration(off) * time.Second)
		if (start.IsZero() || !u.Before(start)) && (stop.IsZero() || u.Before(stop)) {
			if first.IsZero() {
				first = u
			} else if second.IsZero() {
				second = u
			}
		}
		if stop.IsZero() {
			break
		}
		p, prevOff, started = stop, off, true
	}
	return first, second, gap
}

// maxWall is the latest wall-clock time the zone's clock has shown up to
// u: after a fall-back, the time it showed before turning back. A fixed
// time at or before it is already due.
func (t Ticks) maxWall(u time.Time) time.Time {
	m := t.wallAt(u)
	start, _ := u.In(t.loc).ZoneBounds()
	for !start.IsZero() && start.After(u.Add(-27*time.Hour)) {
		before := start.Add(-time.Nanosecond)
		if w := t.wallAt(before); w.After(m) {
			m = w
		}
		start, _ = before.In(t.loc).ZoneBounds()
	}
	return m
}

// wildAfter is a wildcard expression's first tick after u: the first
// instant after u at which the zone's clock shows a matching time,
// walking the zone's offset periods.
func (t Ticks) wildAfter(u time.Time) Tick {
	p, base := u, t.wallAt(u)
	for range 1000 {
		l := p.In(t.loc)
		_, off := l.Zone()
		_, stop := l.ZoneBounds()
		w := t.wall.Next(base)
		if w.IsZero() {
			return Tick{}
		}
		at := w.Add(-time.Duration(off) * time.Second)
		if stop.IsZero() || at.Before(stop) {
			return t.wildTick(at, w)
		}
		p, base = stop, t.wallAt(stop).Add(-time.Nanosecond)
	}
	return Tick{}
}

// latestBefore returns the latest tick at or after from and due before
// cut; from when there is none later. It searches back from cut in
// doubling steps, so a long outage of a frequent schedule costs a few
// steps, not one per missed tick.
func (t Ticks) latestBefore(from Tick, cut time.Time) Tick {
	start := from
	for d := time.Second; cut.Add(-d).After(from.At); d *= 2 {
		if n := t.After(cut.Add(-d)); !n.IsZero() && n.At.Before(cut) {
			start = n
			break
		}
	}
	m := start
	for range 1_000_000 {
		n := t.Next(m)
		if n.IsZero() || !n.At.Before(cut) {
			break
		}
		m = n
	}
	return m
}

// Step is what a firer does with a due schedule (Ticks.Step).
type Step struct {
	// Fire is the tick to submit a run for; zero: none this step.
	Fire Tick
	// Next is the schedule's next tick after this step; zero when the
	// expression never fires again.
	Next Tick
	// Skipped: ticks before Next (other than Fire) were missed and
	// dropped.
	Skipped bool
}

// Step says what to do with a schedule whose next tick is next, at now
// (Redis time): ok false when it is not due. A tick no older than late is
// fired (late firers catch up tick by tick, none lost); older ones were
// missed while no runner was up: missed MissedSkip drops them, and the
// schedule goes on with the first tick not older than late, MissedLatest
// fires the latest of them once and then goes on.
func (t Ticks) Step(next Tick, now time.Time, late time.Duration, missed string) (Step, bool) {
	if next.At.After(now) {
		return Step{}, false
	}
	cut := now.Add(-late)
	if !next.At.Before(cut) {
		return Step{Fire: next, Next: t.Next(next)}, true
	}
	first := t.After(cut.Add(-time.Nanosecond))
	if missed == MissedLatest {
		latest := t.latestBefore(next, cut)
		return Step{Fire: latest, Next: first, Skipped: latest.Label != next.Label}, true
	}
	return Step{Next: first, Skipped: true}, true
}
