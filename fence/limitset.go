package fence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Setting or deleting a limit. Each limit key keeps, beside its holders,
// the concurrency its frees hand slots on by ("~c"): a free then needs no
// read of the definitions. A change brings every key seen under the limit
// in line with the definition now stored, in the same step on a single
// server (limit_set.lua) and key by key right after it on a Redis Cluster
// (limit_conc.lua), where the definitions live in another slot. So a free
// after a lowered limit hands on by the new limit, never the old, and a
// raised one (or one deleted) hands its free slots to the waiters at once
// rather than at the next claim, free or recheck.

// applyLimit stores def ("" deletes) under name and brings the keys it
// governs in line; it reports whether name was set before.
func (s *Store) applyLimit(ctx context.Context, name, def string) (bool, error) {
	seen, err := s.governedKeys(ctx, name)
	if err != nil {
		return false, err
	}
	if s.onCluster() {
		return s.applyLimitClustered(ctx, name, def, seen)
	}
	for try := 0; ; try++ {
		keys := []string{s.keys.LimitDefs(), s.keys.LimitSeen()}
		for _, k := range seen {
			keys = append(keys, s.keys.LimitHolders(k), s.keys.LimitWaiters(k))
		}
		v, err := s.run(ctx, "limit_set", keys, name, def)
		if err != nil {
			return false, err
		}
		_, r, err := reply(s.takeWakes(ctx, v))
		if errors.Is(err, errLimitKeys) && len(r) > 0 && try < 5 {
			// A key claimed for the first time meanwhile: again with it.
			seen = strings.Split(asString(r[0]), ",")
			continue
		}
		if err != nil {
			return false, err
		}
		return len(r) > 0 && asInt(r[0]) == 1, nil
	}
}

// applyLimitClustered is applyLimit on a Redis Cluster: the definition
// first, then each key seen under name (limit_conc.lua, one pipeline).
// A claim that read the definitions before the change may still take its
// slot under the old limit: the change holds from the claims that start
// after it (docs/flow-control.md, "Redis Cluster").
func (s *Store) applyLimitClustered(ctx context.Context, name, def string, seen []string) (bool, error) {
	var existed bool
	if def == "" {
		n, err := s.rdb.HDel(ctx, s.keys.LimitDefs(), name).Result()
		if err != nil {
			return false, err
		}
		existed = n > 0
	} else {
		n, err := s.rdb.HSet(ctx, s.keys.LimitDefs(), name, def).Result()
		if err != nil {
			return false, err
		}
		existed = n == 0
	}
	if len(seen) == 0 {
		return existed, nil
	}
	defs, err := s.Limits(ctx)
	if err != nil {
		return existed, err
	}
	cmds := s.runEach(ctx, "limit_conc", len(seen), func(i int) ([]string, []any) {
		l, _ := Resolve(defs, seen[i])
		return []string{s.keys.LimitHolders(seen[i]), s.keys.LimitWaiters(seen[i])}, []any{l.Concurrency}
	})
	var errs []error
	for i, c := range cmds {
		v, err := c.Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("limit %s: %w", seen[i], err))
			continue
		}
		if r, ok := v.([]any); ok && len(r) > 1 {
			if w, ok := r[1].([]any); ok {
				s.wakeAll(ctx, w)
			}
		}
	}
	return existed, errors.Join(errs...)
}

// governedKeys lists the keys seen (claimed under) that name governs:
// name itself, or every key under a prefix rule's prefix.
func (s *Store) governedKeys(ctx context.Context, name string) ([]string, error) {
	all, err := s.rdb.ZRange(ctx, s.keys.LimitSeen(), 0, -1).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read limit keys: %w", err)
	}
	rule, isRule := strings.CutSuffix(name, "*")
	var out []string
	for _, k := range all {
		if k == name || (isRule && strings.HasPrefix(k, rule)) {
			out = append(out, k)
		}
	}
	return out, nil
}
