package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// Fired is one firer step on a schedule: a tick's run submitted, missed
// ticks skipped, or a problem reported on the schedule.
type Fired struct {
	Schedule string
	// Tick is when the tick fired was due, Label its wall-clock time (the
	// run id's suffix); zero and "" when none was (Outcome says why).
	Tick  time.Time
	Label string
	// Run is the tick's run id ("" when none was submitted).
	Run string
	// Outcome: "created", "existed" (another firer or an earlier try of
	// this one submitted it), "skipped: thread busy",
	// "skipped missed ticks", "not submitted" (Problem says why).
	Outcome string
	// Problem is what was reported on the schedule: its stored definition
	// or run spec no longer validates. The schedule goes on ticking.
	Problem string
	// Replayed: the schedule had already been moved on by this same step
	// (another firer of the tick, or this one before a lost reply).
	Replayed bool
}

// Outcomes of a firer step (Fired.Outcome).
const (
	FiredCreated    = "created"
	FiredExisted    = "existed"
	FiredBusy       = "skipped: thread busy"
	FiredSkipped    = "skipped missed ticks"
	FiredProblem    = "not submitted"
	maxStepsPerCall = 100
)

// brokenRecheck is when a schedule whose expression no longer parses is
// looked at again.
const brokenRecheck = time.Minute

// FireDue fires every due schedule once per due tick: the step a runner's
// scheduler takes each interval (runner.Scheduler). late is how old a tick
// may be and still be fired; older ones were missed (spec.Schedule.Missed).
// Firers need no leader: see package doc, "Schedules". It returns the
// steps it made; an error (Redis) leaves the schedules for the next call,
// which repeats nothing: each tick's run id is the tick's.
func (c *Client) FireDue(ctx context.Context, late time.Duration) ([]Fired, error) {
	now, due, err := c.store.DueSchedules(ctx)
	if err != nil {
		return nil, err
	}
	var out []Fired
	var errs []error
	for _, info := range due {
		steps, err := c.fire(ctx, info, now, late)
		out = append(out, steps...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// fire steps one schedule until its next tick is after now. It stops,
// with no error, when another firer moved, replaced or deleted it.
func (c *Client) fire(ctx context.Context, info fence.ScheduleInfo, now time.Time, late time.Duration) ([]Fired, error) {
	var sched spec.Schedule
	var ticks spec.Ticks
	err := json.Unmarshal(info.Def, &sched)
	if err == nil {
		ticks, err = spec.ParseCron(sched.Cron, sched.TZ)
	}
	if err != nil {
		// Nothing to compute ticks with: report it and look again later.
		problem := fmt.Sprintf("stored definition does not parse: %v", err)
		f := Fired{Schedule: info.Name, Outcome: FiredProblem, Problem: problem}
		// No label for the recheck: a definition mended meanwhile labels it.
		_, aerr := c.store.AdvanceSchedule(ctx, fence.Advance{Name: info.Name, Gen: info.Gen, Expected: info.Next,
			ExpectedTick: info.Tick, Next: now.Add(brokenRecheck), Outcome: FiredProblem, Error: problem})
		return []Fired{f}, ignoreMoved(aerr)
	}
	sched.Name = info.Name
	invalid := sched.Validate(c.limits)

	var out []Fired
	// The stored label names the tick. A schedule stored without one (by
	// an earlier version, or rechecked while its definition did not parse)
	// goes on from the first tick due at or after its due time.
	next, stored := spec.Tick{Label: info.Tick, At: info.Next}, info.Tick
	if next.Label == "" {
		next = ticks.After(info.Next.Add(-time.Nanosecond))
	}
	for range maxStepsPerCall {
		step, due := ticks.Step(next, now, late, sched.Missed)
		if !due {
			return out, nil
		}
		if step.Next.IsZero() { // no tick ever again ("0 0 29 2 *" past 2096)
			step.Next = ticks.TickAt(now.Add(100 * 365 * 24 * time.Hour))
		}
		f := Fired{Schedule: info.Name, Tick: step.Fire.At, Label: step.Fire.Label, Outcome: FiredSkipped}
		if !step.Fire.IsZero() {
			if invalid != nil {
				f.Outcome, f.Problem = FiredProblem, fmt.Sprintf("run spec does not validate: %v", invalid)
			} else if err := c.submitTick(ctx, &sched, step.Fire, &f); err != nil {
				return out, err // Redis or the network: the next call submits the same id again
			}
		}
		a := fence.Advance{Name: info.Name, Gen: info.Gen, Expected: next.At, ExpectedTick: stored,
			Fired: step.Fire.At, FiredTick: step.Fire.Label, Run: f.Run,
			Next: step.Next.At, NextTick: step.Next.Label, Outcome: f.Outcome, Error: f.Problem}
		replayed, err := c.store.AdvanceSchedule(ctx, a)
		if err != nil {
			return out, ignoreMoved(err)
		}
		f.Replayed = replayed
		out = append(out, f)
		next, stored = step.Next, step.Next.Label
	}
	return out, nil
}

// submitTick submits the tick's run and says in f what came of it. It
// returns an error only when the outcome is unknown (Redis, the network):
// the tick must then be submitted again, under the same id.
func (c *Client) submitTick(ctx context.Context, sched *spec.Schedule, tick spec.Tick, f *Fired) error {
	run := sched.TickRun(tick)
	f.Run = run.ID
	sub, err := c.Submit(ctx, run)
	switch {
	case err == nil || sub.RunID != "": // stored; a failed enqueue is the sweeper's
		f.Outcome = FiredCreated
		if !sub.Created {
			f.Outcome = FiredExisted
		}
	case errors.Is(err, fence.ErrRunConflict):
		// The tick's id holds a run with another spec: the tick was
		// submitted under the schedule's earlier definition.
		f.Outcome = FiredExisted
	case errors.Is(err, fence.ErrThreadBusy):
		f.Outcome, f.Run = FiredBusy, ""
	case errors.Is(err, spec.ErrInvalid):
		f.Outcome, f.Run, f.Problem = FiredProblem, "", fmt.Sprintf("run spec does not validate: %v", err)
	default:
		return fmt.Errorf("schedule %s: submit tick %s: %w", sched.Name, tick.Label, err)
	}
	return nil
}

// ignoreMoved: another firer moved, replaced or deleted the schedule
// since it was read; the next call reads it again.
func ignoreMoved(err error) error {
	if errors.Is(err, fence.ErrScheduleMoved) || errors.Is(err, fence.ErrScheduleChanged) || errors.Is(err, fence.ErrNotFound) {
		return nil
	}
	return err
}
