package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

const scheduleHelp = "Cron schedules: a run spec submitted at every tick of a cron expression by\n" +
	"whichever runner comes first; each tick is one run, however many runners fire\n" +
	"it: cron.NAME.TICK, TICK the wall-clock time in the schedule's zone\n" +
	"(cron.nightly.20261101T013000; in UTC with a Z: cron.nightly.20261204T000000Z).\n" +
	"\n" +
	"  add NAME --cron EXPR [flags] SPEC-FILE  store the schedule, or replace it;\n" +
	"                                           prints NAME and its next tick\n" +
	"  list [--json]                           every schedule with its next and last tick\n" +
	"  rm NAME                                 delete it (its runs stay)\n" +
	"\n" +
	"EXPR has five fields (minute hour day-of-month month day-of-week), six with\n" +
	"seconds first (\"*/10 * * * * *\"), or is @hourly, @daily, \"@every 90s\".\n" +
	"A bad expression, zone, name or spec changes nothing (exit 2).\n" +
	"See docs/schedules.md."

const scheduleFlags = "  --cron EXPR       the cron expression (add; required)\n" +
	"  --tz ZONE         IANA time zone the expression is read in (default UTC); a\n" +
	"                    time the clock shows twice fires once, one it skips fires\n" +
	"                    at the change; *-hour expressions follow elapsed time\n" +
	"  --missed POLICY   ticks missed while no runner was up: skip (default) drops\n" +
	"                    them, latest runs the latest of them once\n" +
	"  --thread T        each tick's run's thread\n" +
	"  --multitask S     what a tick does when the thread is busy: reject (skip the\n" +
	"                    tick: never overlap), enqueue (queue behind it), interrupt,\n" +
	"                    rollback\n" +
	"  --json            list: print a JSON array of schedules\n"

// schedule runs enqueue schedule add|list|rm.
func (a *app) schedule(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("missing add, list or rm")
	}
	switch args[0] {
	case "add":
		return a.scheduleAdd(ctx, args[1:])
	case "list", "ls":
		return a.scheduleList(ctx, args[1:])
	case "rm", "remove", "delete":
		return a.scheduleRm(ctx, args[1:])
	case "-h", "-help", "--help", "help":
		return &usageError{help: true}
	}
	return usagef("unknown schedule command %q (add, list or rm)", args[0])
}

func (a *app) scheduleAdd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("schedule add", flag.ContinueOnError)
	var s spec.Schedule
	fs.StringVar(&s.Cron, "cron", "", "")
	fs.StringVar(&s.TZ, "tz", "", "")
	fs.StringVar(&s.Missed, "missed", "", "")
	fs.StringVar(&s.Thread, "thread", "", "")
	fs.StringVar(&s.Multitask, "multitask", "", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) < 2:
		return usagef("want NAME and SPEC-FILE (- reads stdin)")
	case len(pos) > 2:
		return usagef("unexpected argument %q", pos[2])
	case s.Cron == "":
		return usagef("missing --cron EXPR")
	}
	s.Name = pos[0]
	file := pos[1]
	data, err := readSpec(a.stdin, file, a.cfg.limits())
	if file == "-" {
		file = "stdin"
	}
	if errors.Is(err, spec.ErrInvalid) {
		return specErrors(file, err)
	}
	if err != nil {
		return badInput(err)
	}
	run, err := spec.ParseAs(data, spec.FormatOf(file))
	if err != nil {
		return specErrors(file, err)
	}
	s.Run = run
	// Every problem, flags and spec alike, before Redis is touched.
	if err := s.Validate(spec.Limits{MaxInputBytes: a.cfg.MaxInputBytes}); err != nil {
		return badInput(err)
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	st, changed, err := cl.PutSchedule(ctx, &s)
	if err != nil {
		return err
	}
	if !changed {
		a.log.Info("schedule_unchanged", "schedule", s.Name)
	}
	_, err = fmt.Fprintf(a.stdout, "%s next %s\n", st.Name, st.Next.UTC().Format(time.RFC3339))
	return err
}

func (a *app) scheduleList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("schedule list", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	list, err := cl.Schedules(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, list)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTZ\tNEXT\tLAST\tLAST RUN\tOUTCOME")
	for _, s := range list {
		last := "-"
		if s.Last != nil {
			last = s.Last.UTC().Format(time.RFC3339)
		}
		outcome := orDash(s.Outcome)
		if s.Error != "" {
			outcome = "error: " + s.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, oneLine(s.Cron, 40), orDash(s.TZ),
			s.Next.UTC().Format(time.RFC3339), last, orDash(s.LastRun), oneLine(outcome, 80))
	}
	return tw.Flush()
}

func (a *app) scheduleRm(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("schedule rm", flag.ContinueOnError)
	name, err := oneArg(fs, args, "NAME")
	if err != nil {
		return err
	}
	if err := fence.ValidateID("schedule name", name); err != nil {
		return badInput(err)
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := cl.DeleteSchedule(ctx, name); err != nil {
		if errors.Is(err, fence.ErrNotFound) {
			return fmt.Errorf("schedule %s not found (redis %s, BATON_PREFIX %s)", name, a.cfg.Redis, a.cfg.Prefix)
		}
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "deleted schedule %s\n", name)
	return err
}
