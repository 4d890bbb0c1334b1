package fence

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// OldLayout returns the indexes of the key layout before shards (one
// global leases, ready, finished, queued and runs key) that exist under
// the store's prefix. Runs stored under that layout are invisible to
// this version: drain them with the version that made them.
func (s *Store) OldLayout(ctx context.Context) ([]string, error) {
	pipe := s.rdb.Pipeline()
	names := []string{"leases", "ready", "finished", "queued", "runs"}
	cmds := make([]*redis.IntCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.Exists(ctx, s.keys.prefix()+":"+n) // one key per call: a cluster refuses cross-slot EXISTS
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("old layout: %w", err)
	}
	var found []string
	for i, c := range cmds {
		if c.Val() > 0 {
			found = append(found, s.keys.prefix()+":"+names[i])
		}
	}
	return found, nil
}
