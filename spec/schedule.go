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

// TickRunID is the id of the run a schedule submits for its tick:
// "cron.", the name, "." and the tick's label, its wall-clock time
// (Tick). Every firer of the tick derives the same id, so however many
// submit it, and however often a lost reply makes one submit again, the
// tick is one run; and because the label is the wall-clock time, not an
// instant, firers that place a fall-back time differently still agree.
func TickRunID(name string, tick Tick) string { return "cron." + name + "." + tick.Label }

// RunID is the id of the run for the tick due at the instant tick of a
// schedule read in UTC, or an @every schedule (TickRunID).
func RunID(name string, tick time.Time) string {
	return "cron." + name + "." + tick.UTC().Format(utcLayout)
}

// cronParser reads five fields, or six with seconds first, and the
// descriptors (@hourly, @every 5m).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

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
	t, err := newTicks(s, loc, tz, e)
	if err != nil {
		return Ticks{}, &Error{Field: "cron", Msg: err.Error()}
	}
	if t.After(time.Now()).IsZero() {
		return Ticks{}, &Error{Field: "cron", Msg: fmt.Sprintf("%s never fires: no time matches it in the next five years", quote(e))}
	}
	return t, nil
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
	run := s.TickRun(Tick{Label: "19700101T000000Z"})
	run.ID = "" // the name's problems are reported above
	if err := run.Validate(lim); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// TickRun returns the run to submit for tick: a copy of the schedule's
// run spec with the tick's id (TickRunID) and the schedule's thread and
// strategy.
func (s *Schedule) TickRun(tick Tick) *Run {
	r := *s.Run
	r.ID = TickRunID(s.Name, tick)
	if s.Thread != "" {
		r.Thread = s.Thread
	}
	if s.Multitask != "" {
		r.Multitask = s.Multitask
	}
	return &r
}
