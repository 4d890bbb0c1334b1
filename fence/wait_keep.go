package fence

import (
	"context"
	"errors"
	"fmt"
)

// keepWait keeps the thread state of n, a parked node, alive while it
// waits (wait_keep.lua): a thread's checkpoints expire a retention after
// their last write, and a node that waits writes nothing, so each park,
// and then the sweeper every half retention, gives them the retention
// again from now. A node that no longer waits is left alone, so its
// thread's state expires as any other. Safe to call any number of times.
func (s *Store) keepWait(ctx context.Context, n NodeRef) error {
	for range 10 {
		names, err := s.rdb.HKeys(ctx, s.keys.Checkpoints(n.Thread)).Result()
		if err != nil {
			return fmt.Errorf("keep %s: %w", n, err)
		}
		keys := []string{s.keys.Node(n.Thread, n.Run, n.Node), s.keys.Waits(ShardOf(n.Thread)), s.keys.Checkpoints(n.Thread)}
		args := []any{n.Ref(), s.retentionMS, len(names)}
		for _, ns := range names {
			k := s.keys.CheckpointNS(n.Thread, ns)
			keys = append(keys, k[0], k[1], k[2], k[3])
			args = append(args, ns)
		}
		v, err := s.run(ctx, "wait_keep", keys, args...)
		if err == nil {
			_, _, err = reply(v)
		}
		if errors.Is(err, errActiveChanged) {
			continue // a namespace was added meanwhile: read again
		}
		if err != nil {
			return fmt.Errorf("keep %s: %w", n, err)
		}
		return nil
	}
	return fmt.Errorf("keep %s: the thread's namespaces kept changing", n)
}
