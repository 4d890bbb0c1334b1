package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/batonrun/baton/client"
)

// Scheduler defaults (WorkerConfig.ScheduleInterval, ScheduleLate).
const (
	DefaultScheduleInterval = time.Second
	DefaultScheduleLate     = time.Minute
)

// schedulerParams builds a scheduler.
type schedulerParams struct {
	client   *client.Client
	interval time.Duration // how often due schedules are looked for
	late     time.Duration // how old a tick may be and still fire
	logger   *slog.Logger
	metrics  *Metrics
}

// scheduler fires cron schedules. Every runner runs one and none leads:
// each tick's run id is derived from the schedule and the tick, and a
// schedule moves on by a compare-and-set on the tick a firer read, so
// firers racing or retrying make one run per tick (client.FireDue; the
// reasoning is in package client's doc, "Schedules"). A schedule that
// cannot fire is reported on the schedule and logged; the scheduler never
// stops on it.
type scheduler struct {
	client   *client.Client
	interval time.Duration
	late     time.Duration
	log      *slog.Logger
	m        *Metrics
	wg       sync.WaitGroup
}

func newScheduler(p schedulerParams) *scheduler {
	return &scheduler{client: p.client, interval: p.interval, late: p.late, log: p.logger, m: p.metrics}
}

// start fires due schedules every interval until ctx ends.
func (s *scheduler) start(ctx context.Context) {
	s.wg.Go(func() {
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			s.tick(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// wait returns once the loop has stopped (its context ended).
func (s *scheduler) wait() { s.wg.Wait() }

func (s *scheduler) tick(ctx context.Context) {
	fired, err := s.client.FireDue(ctx, s.late)
	for _, f := range fired {
		s.m.scheduleStep(f.Outcome)
		switch {
		case f.Problem != "":
			s.log.Warn("schedule_problem", "schedule", f.Schedule, "problem", f.Problem)
		case f.Outcome == client.FiredCreated:
			s.log.Info("schedule_fired", "schedule", f.Schedule, "tick", f.Tick, "run_id", f.Run)
		default:
			s.log.Debug("schedule_step", "schedule", f.Schedule, "tick", f.Tick, "run_id", f.Run, "outcome", f.Outcome,
				"replayed", f.Replayed)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		s.m.scheduleStep("error")
		s.log.Warn("schedule_fire_failed", "err", err)
	}
}

// scheduleStep counts a scheduler step by its outcome
// (baton_schedule_steps_total).
func (m *Metrics) scheduleStep(outcome string) {
	switch outcome {
	case client.FiredBusy:
		outcome = "skipped_busy"
	case client.FiredSkipped:
		outcome = "skipped_missed"
	case client.FiredProblem:
		outcome = "problem"
	}
	m.ScheduleSteps.WithLabelValues(outcome).Inc()
}
