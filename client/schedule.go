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

// ScheduleStatus is a stored schedule with its ticks: what enqueue
// schedule list prints and GET /v1/schedules answers.
type ScheduleStatus struct {
	spec.Schedule
	// Next is when the next tick is due (Redis time), NextRun the id its
	// run will have: cron.NAME.TICK, the tick's wall-clock time in the
	// schedule's zone (docs/schedules.md).
	Next    time.Time `json:"next"`
	NextRun string    `json:"next_run,omitempty"`
	// Last is the last tick fired and LastRun its run (absent before the
	// first); Outcome says what the last firer step did ("created",
	// "existed", "skipped: thread t busy", "skipped missed ticks").
	Last    *time.Time `json:"last,omitempty"`
	LastRun string     `json:"last_run,omitempty"`
	Outcome string     `json:"outcome,omitempty"`
	// Error is a problem a runner reported while firing it (its stored run
	// spec no longer validates); the schedule stays and goes on ticking.
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func scheduleStatus(info fence.ScheduleInfo) ScheduleStatus {
	out := ScheduleStatus{Next: info.Next, LastRun: info.LastRun, Outcome: info.Outcome, Error: info.Error,
		CreatedAt: info.CreatedAt, UpdatedAt: info.UpdatedAt}
	if err := json.Unmarshal(info.Def, &out.Schedule); err != nil {
		out.Error = fmt.Sprintf("stored definition unreadable: %v", err)
	}
	out.Name = info.Name
	if info.Tick != "" {
		out.NextRun = spec.TickRunID(info.Name, spec.Tick{Label: info.Tick})
	}
	if !info.Last.IsZero() {
		last := info.Last
		out.Last = &last
	}
	return out
}

// PutSchedule validates s and stores it, created or replaced: from now
// on, some runner submits s.TickRun(tick) at each tick (spec.Ticks says
// which, across daylight-saving changes). Bad input is
// every problem at once, each a *spec.Error naming its field (errors.Is
// spec.ErrInvalid), and nothing stored changes. Replacing a schedule
// restarts its ticks from now and keeps its last tick; putting the same
// definition again changes nothing (changed false).
func (c *Client) PutSchedule(ctx context.Context, s *spec.Schedule) (st ScheduleStatus, changed bool, err error) {
	if s == nil {
		return ScheduleStatus{}, false, &spec.Error{Field: "schedule", Msg: "missing"}
	}
	if err := s.Validate(c.limits); err != nil {
		return ScheduleStatus{}, false, err
	}
	// What the live runners would refuse of each tick's run is refused now,
	// not at the first tick (each tick is checked again when it fires).
	if err := c.checkPolicy(ctx, s.TickRun(spec.Tick{Label: "19700101T000000Z"})); err != nil { // policy.go
		return ScheduleStatus{}, false, err
	}
	ticks, err := spec.ParseCron(s.Cron, s.TZ) // parses: Validate said so
	if err != nil {
		return ScheduleStatus{}, false, err
	}
	def, err := json.Marshal(s)
	if err != nil {
		return ScheduleStatus{}, false, fmt.Errorf("put schedule %s: %w", s.Name, err)
	}
	now, err := c.store.Redis().Time(ctx).Result()
	if err != nil {
		return ScheduleStatus{}, false, fmt.Errorf("put schedule %s: %w", s.Name, err)
	}
	next := ticks.After(now)
	if _, _, changed, err = c.store.PutSchedule(ctx, s.Name, def, next.At, next.Label); err != nil {
		return ScheduleStatus{}, false, err
	}
	st, err = c.Schedule(ctx, s.Name)
	return st, changed, err
}

// Schedule reads one schedule; a missing one is an *Error (errors.Is
// fence.ErrNotFound).
func (c *Client) Schedule(ctx context.Context, name string) (ScheduleStatus, error) {
	if err := fence.ValidateID("schedule name", name); err != nil {
		return ScheduleStatus{}, err
	}
	info, err := c.store.GetSchedule(ctx, name)
	if errors.Is(err, fence.ErrNotFound) {
		return ScheduleStatus{}, &Error{Msg: fmt.Sprintf("schedule %s not found", name), Err: err}
	}
	if err != nil {
		return ScheduleStatus{}, err
	}
	return scheduleStatus(info), nil
}

// Schedules lists every schedule, by name.
func (c *Client) Schedules(ctx context.Context) ([]ScheduleStatus, error) {
	_, infos, err := c.store.ListSchedules(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleStatus, 0, len(infos))
	for _, info := range infos {
		out = append(out, scheduleStatus(info))
	}
	return out, nil
}

// DeleteSchedule deletes a schedule; its runs stay. A missing one is an
// *Error (errors.Is fence.ErrNotFound).
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	if err := fence.ValidateID("schedule name", name); err != nil {
		return err
	}
	err := c.store.DeleteSchedule(ctx, name)
	if errors.Is(err, fence.ErrNotFound) {
		return &Error{Msg: fmt.Sprintf("schedule %s not found", name), Err: err}
	}
	return err
}
