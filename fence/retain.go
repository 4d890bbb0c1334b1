package fence

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Terminal reports whether a run status is final.
func Terminal(status string) bool {
	return status == "SUCCEEDED" || status == "FAILED" || status == "CANCELLED"
}

// Retain sets the time to live of a finished run's keys (run, nodes,
// events, locator): the run stays readable for ttl, then Redis frees it. A
// late write from a stale owner then finds no node (ErrNotFound) and changes
// nothing. Retain refuses a run that has not finished.
func (s *Store) Retain(ctx context.Context, run string, ttl time.Duration) error {
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return fmt.Errorf("retain %s: %w", run, err)
	}
	h, err := s.rdb.HMGet(ctx, s.keys.Run(thread, run), "status", "nodes").Result()
	if err != nil {
		return fmt.Errorf("retain %s: %w", run, err)
	}
	if status := asString(h[0]); !Terminal(status) {
		return fmt.Errorf("retain %s: run is %s, not finished", run, status)
	}
	var ids []string
	if err := json.Unmarshal([]byte(asString(h[1])), &ids); err != nil {
		return fmt.Errorf("retain %s: node list: %w", run, err)
	}
	pipe := s.rdb.Pipeline()
	for _, key := range []string{s.keys.Run(thread, run), s.keys.Events(thread, run), s.keys.Locator(run)} {
		pipe.Expire(ctx, key, ttl)
	}
	for _, id := range ids {
		pipe.Expire(ctx, s.keys.Node(thread, run, id), ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("retain %s: %w", run, err)
	}
	return nil
}

// TrimRuns drops listing entries of runs created before cutoff. Pick a
// cutoff older than any run still running: a trimmed run stays readable by
// id, it only leaves the listing.
func (s *Store) TrimRuns(ctx context.Context, cutoff time.Time) (int64, error) {
	return s.rdb.ZRemRangeByScore(ctx, s.keys.Runs(), "-inf", fmt.Sprintf("(%d", cutoff.UnixMilli())).Result()
}
