package fence

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Promoted is a queued run that Promote started.
type Promoted struct {
	Run    string
	Ready  []string // its nodes now READY: enqueue them
	Queues []string // Queues[i] is Ready[i]'s queue
}

// Promote starts the thread's next queued run once its active run has
// ended: the head of the queue becomes the active run, RUNNING, with its
// root nodes READY. In the same atomic step, a rollback run still queued
// whose target is the ended active run has that run's writes removed from
// the thread's checkpoints first (promote.lua), so the thread's state is
// what it was before that run whichever run starts next. Heads cancelled
// while queued are dropped. It returns nil when nothing started: the queue
// is empty or the active run has not ended. Safe to call any number of
// times from any number of processes; each call is a few round trips.
func (s *Store) Promote(ctx context.Context, thread, who string) (*Promoted, error) {
	for try := 0; try < 20; try++ {
		pipe := s.rdb.Pipeline()
		activeCmd := pipe.Get(ctx, s.keys.Active(thread))
		queueCmd := pipe.LRange(ctx, s.keys.Queue(thread), 0, -1)
		nsCmd := pipe.HKeys(ctx, s.keys.Checkpoints(thread))
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("promote %s: %w", thread, err)
		}
		active, queue, names := activeCmd.Val(), queueCmd.Val(), nsCmd.Val()
		if len(queue) == 0 {
			return nil, nil
		}
		head := queue[0]
		raw, err := s.rdb.HGet(ctx, s.keys.Run(thread, head), "nodes").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("promote %s: %w", thread, err)
		}
		var ids []string
		_ = json.Unmarshal([]byte(raw), &ids) // a head whose keys expired has none: it is dropped
		activeID := cmp.Or(active, thread)    // the key's, else the run whose id is the thread
		keys := []string{s.keys.Active(thread), s.keys.Run(thread, activeID), s.keys.Queue(thread),
			s.keys.Queued(ShardOf(thread)), s.keys.Ready(ShardOf(thread)), s.keys.Checkpoints(thread),
			s.keys.Events(thread, head), s.keys.Events(thread, activeID)}
		args := []any{active, thread, Ref(thread, head, ""), s.maxlen, who, len(queue), len(names)}
		for _, run := range queue {
			keys = append(keys, s.keys.Run(thread, run))
			args = append(args, run)
		}
		for _, run := range queue {
			keys = append(keys, s.keys.Events(thread, run))
		}
		keys = append(keys, s.keys.Packed(thread, activeID))
		for _, ns := range names {
			k := s.keys.CheckpointNS(thread, ns)
			keys = append(keys, k[0], k[1], k[2], k[3])
			args = append(args, ns)
		}
		for _, id := range ids {
			keys = append(keys, s.keys.Node(thread, head, id))
			args = append(args, id)
		}
		v, err := s.run(ctx, "promote", keys, args...)
		if err != nil {
			return nil, fmt.Errorf("promote %s: %w", thread, err)
		}
		code, r, err := reply(v)
		switch {
		case errors.Is(err, errActiveChanged):
			continue
		case errors.Is(err, ErrThreadBusy):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("promote %s: %w", thread, err)
		case code == 2: // the head was cancelled while queued: the next one
			continue
		case code == 3:
			return nil, nil
		}
		p := &Promoted{Run: head}
		for i := 0; i+1 < len(r); i += 2 {
			p.Ready = append(p.Ready, asString(r[i]))
			p.Queues = append(p.Queues, asString(r[i+1]))
		}
		return p, nil
	}
	return nil, fmt.Errorf("promote %s: the thread kept changing", thread)
}

// QueuedThreads returns up to limit threads whose waiting runs were last
// looked at before the given age, and pushes them back by retry, so
// concurrent sweepers share them. Triggers for Promote, never authority.
func (s *Store) QueuedThreads(ctx context.Context, age, retry time.Duration, limit int) ([]string, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("queued threads: %w", err)
	}
	pipe := s.rdb.Pipeline()
	due := make([]*redis.StringSliceCmd, Shards)
	for i := range due {
		due[i] = pipe.ZRangeByScore(ctx, s.keys.Queued(i), &redis.ZRangeBy{Min: "-inf",
			Max: fmt.Sprint(now.Add(-age).UnixMilli()), Count: int64(limit)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queued threads: %w", err)
	}
	var threads []string
	pipe = s.rdb.Pipeline()
	for i, c := range due {
		if len(c.Val()) == 0 {
			continue
		}
		threads = append(threads, c.Val()...)
		zs := make([]redis.Z, len(c.Val()))
		for j, t := range c.Val() {
			zs[j] = redis.Z{Score: float64(now.Add(retry).UnixMilli()), Member: t}
		}
		pipe.ZAddXX(ctx, s.keys.Queued(i), zs...)
	}
	if len(threads) == 0 {
		return threads, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queued threads: %w", err)
	}
	return threads, nil
}
