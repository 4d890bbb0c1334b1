package fence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Schedule errors (schedule_fire.lua's codes; codeErrors maps them).
var (
	// ErrScheduleChanged: the schedule was replaced since the firer read
	// it; read it again.
	ErrScheduleChanged = errors.New("fence: schedule changed")
	// ErrScheduleMoved: another firer moved the schedule past the tick the
	// caller read; read it again.
	ErrScheduleMoved = errors.New("fence: schedule moved on")
)

// Schedules is the index of every schedule by its next tick (name -> ms,
// Redis time). Every schedule key carries one hash tag, so each schedule
// script touches one Redis Cluster slot.
func (k Keys) Schedules() string { return k.prefix() + ":{schedules}:index" }

// Schedule is one schedule's hash: its definition, generation, next and
// last tick. name passed ValidateID.
func (k Keys) Schedule(name string) string { return k.prefix() + ":{schedules}:s:" + name }

// ScheduleInfo is a schedule as stored. The definition is opaque here
// (package spec reads it); fence keeps the ticks and their outcome.
type ScheduleInfo struct {
	Name string
	// Def is the definition as the client stored it (JSON).
	Def []byte
	// Gen counts the definition's changes; a firer's advance names the
	// generation it read.
	Gen int64
	// Next is when the next tick is due (Redis time), Tick its label, the
	// wall-clock time that names its run; "" for a schedule stored by a
	// version before labels (the firer labels it from Next).
	Next time.Time
	Tick string
	// Last is when the last tick fired was due, LastTick its label and
	// LastRun its run; zero and "" before the first.
	Last     time.Time
	LastTick string
	LastRun  string
	// Outcome says what the last firer step did ("created", "existed",
	// "skipped: ...").
	Outcome string
	// Error is a problem a firer reported (a stored definition that no
	// longer validates); "" when the last step went well.
	Error string
	// CreatedAt, UpdatedAt (definition), FiredAt (the last tick's run was
	// submitted) and CheckedAt (the last firer step), Redis time.
	CreatedAt, UpdatedAt, FiredAt, CheckedAt time.Time
}

// PutSchedule stores the schedule name with definition def, its next
// tick due at next and labelled tick (schedule_put.lua). The same
// definition again changes nothing (changed false, and the stored next
// tick is returned).
func (s *Store) PutSchedule(ctx context.Context, name string, def []byte, next time.Time, tick string) (gen int64, stored time.Time, changed bool, err error) {
	if err := ValidateID("schedule name", name); err != nil {
		return 0, time.Time{}, false, err
	}
	v, err := s.run(ctx, "schedule_put", []string{s.keys.Schedule(name), s.keys.Schedules()},
		name, string(def), strconv.FormatInt(next.UnixMilli(), 10), tick)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("put schedule %s: %w", name, err)
	}
	code, r, err := reply(v)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("put schedule %s: %w", name, err)
	}
	if len(r) < 2 {
		return 0, time.Time{}, false, fmt.Errorf("put schedule %s: short reply", name)
	}
	return asInt(r[0]), time.UnixMilli(asInt(r[1])), code == 1, nil
}

// DeleteSchedule deletes the schedule (schedule_rm.lua): ErrNotFound if
// there is none. The runs it submitted stay.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	if err := ValidateID("schedule name", name); err != nil {
		return err
	}
	v, err := s.run(ctx, "schedule_rm", []string{s.keys.Schedule(name), s.keys.Schedules()}, name)
	if err == nil {
		_, _, err = reply(v)
	}
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	return nil
}

// GetSchedule reads one schedule: ErrNotFound if there is none.
func (s *Store) GetSchedule(ctx context.Context, name string) (ScheduleInfo, error) {
	if err := ValidateID("schedule name", name); err != nil {
		return ScheduleInfo{}, err
	}
	m, err := s.rdb.HGetAll(ctx, s.keys.Schedule(name)).Result()
	if err != nil {
		return ScheduleInfo{}, fmt.Errorf("read schedule %s: %w", name, err)
	}
	if m["def"] == "" {
		return ScheduleInfo{}, fmt.Errorf("read schedule %s: %w", name, ErrNotFound)
	}
	return scheduleOf(name, m), nil
}

// ListSchedules reads every schedule, by name. Redis's time comes with
// them: the firer compares their next ticks with it.
func (s *Store) ListSchedules(ctx context.Context) (time.Time, []ScheduleInfo, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("list schedules: %w", err)
	}
	names, err := s.rdb.ZRange(ctx, s.keys.Schedules(), 0, -1).Result()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("list schedules: %w", err)
	}
	slices.Sort(names)
	out, err := s.readSchedules(ctx, names)
	return now, out, err
}

// DueSchedules reads the schedules whose next tick is not after Redis's
// time, with that time.
func (s *Store) DueSchedules(ctx context.Context) (time.Time, []ScheduleInfo, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("due schedules: %w", err)
	}
	names, err := s.rdb.ZRangeByScore(ctx, s.keys.Schedules(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10)}).Result()
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("due schedules: %w", err)
	}
	out, err := s.readSchedules(ctx, names)
	return now, out, err
}

func (s *Store) readSchedules(ctx context.Context, names []string) ([]ScheduleInfo, error) {
	if len(names) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HGetAll(ctx, s.keys.Schedule(n))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read schedules: %w", err)
	}
	out := make([]ScheduleInfo, 0, len(names))
	for i, n := range names {
		if m := cmds[i].Val(); m["def"] != "" { // deleted since the index was read
			out = append(out, scheduleOf(n, m))
		}
	}
	return out, nil
}

func scheduleOf(name string, m map[string]string) ScheduleInfo {
	ms := func(f string) time.Time {
		n, err := strconv.ParseInt(m[f], 10, 64)
		if err != nil || n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n)
	}
	gen, _ := strconv.ParseInt(m["gen"], 10, 64)
	return ScheduleInfo{Name: name, Def: []byte(m["def"]), Gen: gen, Next: ms("next"), Tick: m["tick"],
		Last: ms("last"), LastTick: m["last_tick"], LastRun: m["last_run"], Outcome: m["outcome"], Error: m["error"],
		CreatedAt: ms("created_at"), UpdatedAt: ms("updated_at"), FiredAt: ms("fired_at"), CheckedAt: ms("checked_at")}
}

// Advance is one firer step on a schedule, as schedule_fire.lua takes it.
type Advance struct {
	Name string
	// Gen, Expected and ExpectedTick are the generation and the next
	// tick (due time and label, as stored: "" when none was) the firer
	// read.
	Gen          int64
	Expected     time.Time
	ExpectedTick string
	// Fired is when the tick whose run the firer submitted (Run) was
	// due, FiredTick its label; zero when none was (missed ticks
	// skipped, or the schedule could not fire).
	Fired     time.Time
	FiredTick string
	Run       string
	// Next and NextTick are the schedule's next tick after this step.
	Next     time.Time
	NextTick string
	// Outcome is a short text for people; Error, when set, is reported
	// on the schedule until a later step goes well.
	Outcome, Error string
}

// AdvanceSchedule moves the schedule from the tick a.Expected,
// a.ExpectedTick to a.Next, a.NextTick (schedule_fire.lua): the label
// is compared as well as the due time, since two wall-clock ticks that
// a daylight-saving change skipped are due at the same instant. It answers nil also when the same step was
// already made (replayed true): by the caller before a lost reply, or by
// another firer of the same tick. ErrScheduleMoved, ErrScheduleChanged
// or ErrNotFound: someone else moved, replaced or deleted it; read again.
func (s *Store) AdvanceSchedule(ctx context.Context, a Advance) (replayed bool, err error) {
	if err := ValidateID("schedule name", a.Name); err != nil {
		return false, err
	}
	fired := ""
	if !a.Fired.IsZero() {
		fired = strconv.FormatInt(a.Fired.UnixMilli(), 10)
	}
	v, err := s.run(ctx, "schedule_fire", []string{s.keys.Schedule(a.Name), s.keys.Schedules()},
		a.Name, strconv.FormatInt(a.Gen, 10), strconv.FormatInt(a.Expected.UnixMilli(), 10), a.ExpectedTick,
		fired, a.FiredTick, strconv.FormatInt(a.Next.UnixMilli(), 10), a.NextTick, a.Run, a.Outcome, a.Error)
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", a.Name, err)
	}
	code, _, err := reply(v)
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", a.Name, err)
	}
	return code == 2, nil
}
