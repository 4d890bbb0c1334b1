package fence

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// KeepLatestCheckpoints removes every checkpoint of thread but the newest
// of each namespace, with what was stored against them
// (agent_ckpt_keep_latest.lua): the thread keeps its state, not its
// history. It is refused with ErrThreadBusy while the thread's active run
// is RUNNING, as DeleteCheckpoints is. It returns how many checkpoints
// went; a retry removes nothing more.
func (s *Store) KeepLatestCheckpoints(ctx context.Context, thread string) (int, error) {
	if err := ValidateID("thread", thread); err != nil {
		return 0, err
	}
	for try := 0; ; try++ {
		active, err := s.rdb.Get(ctx, s.keys.Active(thread)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("prune checkpoints of %s: %w", thread, err)
		}
		names, err := s.rdb.HKeys(ctx, s.keys.Checkpoints(thread)).Result()
		if err != nil {
			return 0, fmt.Errorf("prune checkpoints of %s: %w", thread, err)
		}
		keys := []string{s.keys.Active(thread), s.keys.Run(thread, cmp.Or(active, thread)), s.keys.Checkpoints(thread)}
		args := []any{active, thread}
		for _, ns := range names {
			k := s.keys.CheckpointNS(thread, ns)
			keys = append(keys, k[0], k[1], k[2], k[3])
			args = append(args, ns)
		}
		v, err := s.run(ctx, "agent_ckpt_keep_latest", keys, args...)
		if err != nil {
			return 0, fmt.Errorf("prune checkpoints of %s: %w", thread, err)
		}
		_, r, err := reply(v)
		switch {
		case errors.Is(err, errActiveChanged) && try < 5:
			continue
		case errors.Is(err, ErrThreadBusy):
			return 0, fmt.Errorf("prune checkpoints of %s: run %s is active: %w", thread, asString(r[0]), err)
		case err != nil:
			return 0, fmt.Errorf("prune checkpoints of %s: %w", thread, err)
		}
		return int(asInt(r[0])), nil
	}
}
