package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Deadlines is a shard's index of run deadlines (zset: "thread:run:" ->
// ms), written by the submit of a run with a timeout, the trigger of the
// sweep's TimeOutRuns.
func (k Keys) Deadlines(shard int) string { return k.index(shard, "deadlines") }

// timeoutMS is a run timeout as submit.lua takes it: 0 for none, and at
// least 1 ms for any positive one.
func timeoutMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// TimedOutRun is a run its timeout cancelled.
type TimedOutRun struct {
	Run, Thread string
	Status      string // the run's status after the cancel
	Running     int    // nodes still RUNNING, told to stop
}

// TimeOutRuns cancels what is left of each run whose deadline has passed,
// up to limit per shard (timeout.lua: the deadline is checked and the run
// cancelled in one step). The index is a trigger: the script decides.
func (s *Store) TimeOutRuns(ctx context.Context, who string, limit int64) ([]TimedOutRun, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("time out runs: %w", err)
	}
	pipe := s.rdb.Pipeline()
	due := make([]*redis.StringSliceCmd, Shards)
	for i := range due {
		due[i] = pipe.ZRangeByScore(ctx, s.keys.Deadlines(i), &redis.ZRangeBy{Min: "-inf",
			Max: fmt.Sprint(now.UnixMilli()), Count: limit})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("time out runs: %w", err)
	}
	var out []TimedOutRun
	var errs []error
	for i, c := range due {
		for _, member := range c.Val() {
			thread, run, _, ok := ParseRef(member)
			if !ok {
				s.rdb.ZRem(ctx, s.keys.Deadlines(i), member)
				continue
			}
			res, err := s.timeOut(ctx, thread, run, who)
			switch {
			case err == nil && res.Status != "":
				out = append(out, res)
			case err == nil, errors.Is(err, ErrRunDone), errors.Is(err, ErrNotFound):
			default:
				errs = append(errs, fmt.Errorf("%s: %w", run, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

func (s *Store) timeOut(ctx context.Context, thread, run, who string) (TimedOutRun, error) {
	ids, err := s.nodeIDs(ctx, thread, run)
	if errors.Is(err, ErrNotFound) {
		ids = nil // the script drops the entry
	} else if err != nil {
		return TimedOutRun{}, err
	}
	sh := ShardOf(thread)
	keys := []string{s.keys.Run(thread, run), s.keys.Events(thread, run), s.keys.Ready(sh), s.keys.Finished(sh),
		s.keys.Queue(thread), s.keys.Deadlines(sh)}
	args := []any{who, Ref(thread, run, ""), s.maxlen, s.keys.CancelChannel(), run}
	for _, id := range ids {
		keys = append(keys, s.keys.Node(thread, run, id))
		args = append(args, id)
	}
	if s.onCluster() {
		keys = append(keys, s.keys.Run(thread, run)) // as Cancel
	}
	var (
		code int64
		r    []any
	)
	for try := 0; ; try++ {
		v, err := s.run(ctx, "timeout", keys, args...)
		if err != nil {
			return TimedOutRun{}, err
		}
		v = s.takeWakes(ctx, v)
		code, r, err = reply(v)
		if errors.Is(err, errLimitKeys) && try < 3 {
			// READY nodes name limits: as Cancel, call again with their keys.
			keys = append(keys, s.cancelLimitKeys(asString(r[0]))...)
			continue
		}
		if err != nil || code == 0 {
			return TimedOutRun{}, err
		}
		break
	}
	return TimedOutRun{Run: run, Thread: thread, Status: asString(r[0]), Running: int(asInt(r[1]))}, nil
}
