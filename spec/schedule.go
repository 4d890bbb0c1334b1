package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // every runner and client reads a zone the same way, with or without the system's zoneinfo

	"github.com/robfig/cron/v3"

	"github.com/batonrun/baton/fence/ids"
)

// Schedule is a cron schedule: a run spec submitted at every tick of a
// cron expression, as a user writes it (enqueue schedule add, PUT
// /v1/schedules/{name}).
type Schedule struct {
	// Name names the schedule, an id ([A-Za-z0-9._-]) of at most
	// MaxScheduleName bytes: each tick's run id is derived from it
	// (RunID).
	Name string `json:"name"`
	// Cron is the expression: five fields (minute hour day-of-month month
	// day-of-week), or six with seconds first, or a descriptor such as
	// @hourly, @daily or "@every 90s".
	Cron string `json:"cron"`
	// TZ is the IANA time zone the expression is read in ("Europe/Paris");
	// empty: UTC.
	TZ string `json:"tz,omitempty"`
	// Missed says what a firer does with ticks missed while no runner was
	// up (older than the runners' late window): MissedSkip (the default,
	// "" too) drops them, MissedLatest runs the latest of them once.
	Missed string `json:"missed,omitempty"`
	// Thread and Multitask, when set, are each tick's run's thread and
	// strategy (spec.Run's); "never overlap" is "reject" or "enqueue" on
	// the schedule's own thread. The run spec may set them instead.
	Thread    string `json:"thread,omitempty"`
	Multitask string `json:"multitask,omitempty"`
	// Run is the spec submitted at each tick. Its id is left empty (each
	// tick's is RunID's) and it has no start_at; start_in delays each
	// tick's run.
	Run *Run `json:"run"`
}

// Missed-tick policies (Schedule.Missed).
const (
	MissedSkip   = "skip"
	MissedLatest = "latest"
)

// MaxScheduleName is the longest schedule name, in bytes: with the tick
// appended it stays an id (ids.MaxLen).
const MaxScheduleName = ids.MaxLen - len("cron..20060102T150405Z")

// RunID is the id of the run a schedule submits for its tick: "cron.",
// the name, "." and the tick in UTC to the second. Every firer of the tick
// derives the same id, so however many submit it, and however often a
// lost reply makes one submit again, the tick is one run.
func RunID(name string, tick time.Time) string {
	return "cron." + name + "." + tick.UTC().Format("20060102T150405Z")
}

// cronParser reads five fields, or six with seconds first, and the
// descriptors (@hourly, @every 5m).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Ticks is a schedule's cron expression read in its time zone: the times
// it fires.
type Ticks struct {
	s cron.Schedule
}

// ParseCron reads expr in the zone tz ("" is UTC). A problem is an *Error
// naming the field, "cron" or "tz".
func ParseCron(expr, tz string) (Ticks, error) {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return Ticks{}, &Error{Field: "tz", Msg: fmt.Sprintf("%s is not a known IANA time zone (such as Europe/Paris or UTC)", quote(tz))}
		}
		loc = l
	}
	e := strings.TrimSpace(expr)
	if e == "" {
		return Ticks{}, &Error{Field: "cron", Msg: "empty"}
	}
	if strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ=") {
		return Ticks{}, &Error{Field: "cron", Msg: "name the time zone in tz (--tz), not in the expression"}
	}
	s, err := cronParser.Parse("CRON_TZ=" + loc.String() + " " + e)
	if err != nil {
		return Ticks{}, &Error{Field: "cron", Msg: fmt.Sprintf("%s does not parse: %v (five fields: minute hour day-of-month month day-of-week; six with seconds first; or @hourly, @daily, @every 90s)", quote(e), err)}
	}
	t := Ticks{s: s}
	if t.Next(time.Now()).IsZero() {
		return Ticks{}, &Error{Field: "cron", Msg: fmt.Sprintf("%s never fires", quote(e))}
	}
	return t, nil
}

// Next returns the first tick strictly after t; zero if there is none
// (an expression such as "0 0 30 2 *").
func (t Ticks) Next(after time.Time) time.Time { return t.s.Next(after) }

// latestBefore returns the latest tick at or after from and before cut;
// from when there is none later. It searches back from cut in doubling
// steps, so a long outage of a frequent schedule costs a few steps, not
// one per missed tick.
func (t Ticks) latestBefore(from, cut time.Time) time.Time {
	start := from
	for d := time.Second; cut.Add(-d).After(from); d *= 2 {
		if n := t.Next(cut.Add(-d)); !n.IsZero() && n.Before(cut) {
			start = n
			break
		}
	}
	m := start
	for range 1_000_000 {
		n := t.Next(m)
		if n.IsZero() || !n.Before(cut) {
			break
		}
		m = n
	}
	return m
}

// Step is what a firer does with a due schedule (Ticks.Step).
type Step struct {
	// Fire is the tick to submit a run for; zero: none this step.
	Fire time.Time
	// Next is the schedule's next tick after this step.
	Next time.Time
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
func (t Ticks) Step(next, now time.Time, late time.Duration, missed string) (Step, bool) {
	if next.After(now) {
		return Step{}, false
	}
	cut := now.Add(-late)
	if !next.Before(cut) {
		return Step{Fire: next, Next: t.Next(next)}, true
	}
	// The first tick not older than late: Next rounds up to whole seconds.
	first := t.Next(cut.Add(-time.Nanosecond))
	if missed == MissedLatest {
		latest := t.latestBefore(next, cut)
		return Step{Fire: latest, Next: first, Skipped: !latest.Equal(next)}, true
	}
	return Step{Next: first, Skipped: true}, true
}

// Validate checks the schedule as a whole, the run spec included (with
// the schedule's thread and strategy, as each tick submits it), and
// returns every problem, each an *Error naming its field, joined.
func (s *Schedule) Validate(lim Limits) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &Error{Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if err := ids.Validate("name", s.Name); err != nil {
		bad("name", "%s", idMessage(err))
	} else if len(s.Name) > MaxScheduleName {
		bad("name", "%d bytes, at most %d (each tick's run id is cron.NAME.TICK)", len(s.Name), MaxScheduleName)
	}
	if _, err := ParseCron(s.Cron, s.TZ); err != nil {
		errs = append(errs, err)
	}
	switch s.Missed {
	case "", MissedSkip, MissedLatest:
	default:
		bad("missed", "%s is not a policy (skip or latest)", quote(s.Missed))
	}
	if s.Run == nil {
		bad("run", "missing: the run spec each tick submits")
		return errors.Join(errs...)
	}
	if s.Run.ID != "" {
		bad("run.id", "a schedule names each tick's run itself (cron.NAME.TICK); remove the id")
	}
	if s.Run.StartAt != nil {
		bad("run.start_at", "a fixed start cannot repeat; use start_in to delay each tick's run")
	}
	for _, p := range []struct{ field, sched, run string }{
		{"thread", s.Thread, s.Run.Thread}, {"multitask", s.Multitask, s.Run.Multitask}} {
		if p.sched != "" && p.run != "" && p.sched != p.run {
			bad(p.field, "the schedule says %s, its run spec %s: say it once", quote(p.sched), quote(p.run))
		}
	}
	run := s.TickRun(time.Unix(0, 0))
	run.ID = "" // the name's problems are reported above
	if err := run.Validate(lim); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TickRun returns the run to submit for tick: a copy of the schedule's
// run spec with the tick's id (RunID) and the schedule's thread and
// strategy.
func (s *Schedule) TickRun(tick time.Time) *Run {
	r := *s.Run
	r.ID = RunID(s.Name, tick)
	if s.Thread != "" {
		r.Thread = s.Thread
	}
	if s.Multitask != "" {
		r.Multitask = s.Multitask
	}
	return &r
}
