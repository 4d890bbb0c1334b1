package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// RetainFinished applies a time to live to the keys (run, nodes, events,
// locator) of up to limit runs that ended, taking them off the finished
// index; ttl below zero keeps them forever. Each event stream is stored
// again at its real size as it gets its TTL (compact.lua): a short run's
// stream would otherwise keep Redis's 4 KiB preallocation. The scripts
// that end a run add it to its shard's index, so this costs three round
// trips per batch (per Redis node), never one on a node's path. A run stays readable for ttl; a late write from a stale
// owner then finds no node and changes nothing. It returns how many runs it
// handled.
func (s *Store) RetainFinished(ctx context.Context, ttl time.Duration, limit int64) (int, error) {
	pipe := s.rdb.Pipeline()
	due := make([]*redis.StringSliceCmd, Shards)
	for i := range due {
		due[i] = pipe.ZRange(ctx, s.keys.Finished(i), 0, limit-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("retain: %w", err)
	}
	var refs []NodeRef
	var lists []*redis.StringCmd
	pipe = s.rdb.Pipeline()
	for _, c := range due {
		for _, m := range c.Val() {
			thread, run, _, ok := ParseRef(m)
			if !ok {
				continue
			}
			refs = append(refs, NodeRef{Thread: thread, Run: run})
			lists = append(lists, pipe.HGet(ctx, s.keys.Run(thread, run), "nodes"))
		}
	}
	if len(lists) == 0 {
		return 0, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("retain: %w", err)
	}
	pipe = s.rdb.Pipeline()
	compactTTL := int64(0) // a negative ttl keeps runs forever
	if ttl > 0 {
		compactTTL = max(1, ms(ttl))
	}
	var compacts []*redis.Cmd
	var compactKeys []string
	for i, r := range refs {
		if ttl >= 0 {
			var ids []string
			_ = json.Unmarshal([]byte(lists[i].Val()), &ids) // a run gone already has no keys to expire
			for _, key := range []string{s.keys.Run(r.Thread, r.Run), s.keys.Locator(r.Run)} {
				pipe.Expire(ctx, key, ttl)
			}
			for _, id := range ids {
				pipe.Expire(ctx, s.keys.Node(r.Thread, r.Run, id), ttl)
			}
		}
		if ttl == 0 {
			pipe.Expire(ctx, s.keys.Events(r.Thread, r.Run), 0)
			continue
		}
		// Compacted (see compact.lua) as it gets its time to live.
		key := s.keys.Events(r.Thread, r.Run)
		compactKeys = append(compactKeys, key)
		compacts = append(compacts, s.scripts["compact"].EvalSha(ctx, pipe, []string{key}, compactTTL))
	}
	n := 0
	for i, c := range due {
		if len(c.Val()) > 0 {
			pipe.ZRem(ctx, s.keys.Finished(i), anySlice(c.Val())...)
			n += len(c.Val())
		}
	}
	noScript := func() bool {
		return slices.ContainsFunc(compacts, func(c *redis.Cmd) bool { return isNoScript(c.Err()) })
	}
	if _, err := pipe.Exec(ctx); err != nil && !noScript() {
		return 0, fmt.Errorf("retain: %w", err)
	}
	if noScript() {
		// A node without the script cache (restarted, or a replica just
		// promoted): send those calls as EVAL, which caches the script
		// there (see runEach).
		pipe = s.rdb.Pipeline()
		for i, c := range compacts {
			if isNoScript(c.Err()) {
				s.scripts["compact"].Eval(ctx, pipe, []string{compactKeys[i]}, compactTTL)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, fmt.Errorf("retain: %w", err)
		}
	}
	return n, nil
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TrimRuns drops listing entries of runs created before cutoff. Pick a
// cutoff older than any run still running: a trimmed run stays readable by
// id, it only leaves the listing.
func (s *Store) TrimRuns(ctx context.Context, cutoff time.Time) (int64, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, Shards)
	for i := range cmds {
		cmds[i] = pipe.ZRemRangeByScore(ctx, s.keys.Runs(i), "-inf", fmt.Sprintf("(%d", cutoff.UnixMilli()))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("trim runs: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
