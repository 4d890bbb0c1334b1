package fence

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ThreadInfo is a thread as stored: which run is active, which wait, and
// the newest checkpoint version of each namespace.
type ThreadInfo struct {
	Thread string `json:"thread"`
	// Active is the thread's active run ("" when it never had one). It may
	// have finished: a thread keeps naming its last run until the next
	// starts.
	Active       string           `json:"active,omitempty"`
	ActiveStatus string           `json:"active_status,omitempty"`
	Queued       []string         `json:"queued"`      // runs waiting (not withdrawn), first to start first
	Checkpoints  map[string]int64 `json:"checkpoints"` // ns -> newest version
}

// Thread reads a thread. A thread with no run and no checkpoint is
// ErrNotFound.
func (s *Store) Thread(ctx context.Context, thread string) (*ThreadInfo, error) {
	if err := ValidateID("thread", thread); err != nil {
		return nil, err
	}
	pipe := s.rdb.Pipeline()
	active := pipe.Get(ctx, s.keys.Active(thread))
	queued := pipe.LRange(ctx, s.keys.Queue(thread), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("thread %s: %w", thread, err)
	}
	info := &ThreadInfo{Thread: thread, Active: active.Val(), Queued: []string{}}
	// A run cancelled while queued stays in the queue until the next
	// promotion drops it; it no longer waits, so it is not listed.
	if ids := queued.Val(); len(ids) > 0 {
		pipe := s.rdb.Pipeline()
		sts := make([]*redis.StringCmd, len(ids))
		for i, id := range ids {
			sts[i] = pipe.HGet(ctx, s.keys.Run(thread, id), "status")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("thread %s: %w", thread, err)
		}
		for i, id := range ids {
			if sts[i].Val() == "QUEUED" {
				info.Queued = append(info.Queued, id)
			}
		}
	}
	if info.Active == "" {
		// A run without a thread is its own thread.
		if st, err := s.rdb.HGet(ctx, s.keys.Run(thread, thread), "status").Result(); err == nil {
			info.Active, info.ActiveStatus = thread, st
		}
	} else {
		info.ActiveStatus, _ = s.rdb.HGet(ctx, s.keys.Run(thread, info.Active), "status").Result()
		if info.ActiveStatus == "" {
			// Ended and packed by the retention sweep (about a sweep
			// after its end): its status is in the packed record.
			if p, err := s.packedOf(ctx, thread, info.Active); err == nil && p != nil {
				info.ActiveStatus = p.Run["status"]
			}
		}
	}
	cps, err := s.CheckpointNamespaces(ctx, thread)
	if err != nil {
		return nil, err
	}
	info.Checkpoints = cps
	if info.Active == "" && len(cps) == 0 && len(info.Queued) == 0 {
		return nil, fmt.Errorf("thread %s: %w", thread, ErrNotFound)
	}
	return info, nil
}
