package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// CopyCheckpoints copies every checkpoint namespace of thread from into
// thread to (the Agent Server API's thread copy): the same versions,
// checkpoint ids, data, metadata and pending writes, so the copy's state
// and history are the source's. Each namespace is read in one transaction
// of the source's slot and written by one script in the copy's
// (agent_ckpt_copy.lua), which refuses a namespace the copy has other
// checkpoints in (ErrExists) and answers a retry as the first call. It
// returns how many namespaces it copied. The copy is of what the source
// held when each namespace was read: a run of the source writing
// meanwhile may land in one namespace's copy and not in another's.
func (s *Store) CopyCheckpoints(ctx context.Context, from, to string) (int, error) {
	if err := ValidateID("thread", from); err != nil {
		return 0, err
	}
	if err := ValidateID("thread", to); err != nil {
		return 0, err
	}
	last, err := s.rdb.HGetAll(ctx, s.keys.Checkpoints(from)).Result()
	if err != nil {
		return 0, fmt.Errorf("copy checkpoints of %s: %w", from, err)
	}
	n := 0
	for ns := range last {
		if ValidateNS(ns) != nil {
			continue
		}
		if err := s.copyNS(ctx, from, to, ns); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (s *Store) copyNS(ctx context.Context, from, to, ns string) error {
	src := s.keys.CheckpointNS(from, ns)
	var (
		last     *redis.StringCmd
		versions *redis.ZSliceCmd
		data     *redis.MapStringStringCmd
		ids      *redis.MapStringStringCmd
		writes   *redis.MapStringStringCmd
	)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		last = p.HGet(ctx, s.keys.Checkpoints(from), ns)
		versions = p.ZRangeWithScores(ctx, src[0], 0, -1)
		data = p.HGetAll(ctx, src[1])
		ids = p.HGetAll(ctx, src[2])
		writes = p.HGetAll(ctx, src[3])
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("copy checkpoints of %s ns %q: %w", from, ns, err)
	}
	if last.Val() == "" {
		return nil // deleted since the namespaces were listed
	}
	zs := []string{}
	for _, z := range versions.Val() {
		zs = append(zs, asString(z.Member), strconv.FormatFloat(z.Score, 'f', -1, 64))
	}
	flat := func(h map[string]string, skip ...string) string {
		out := []string{}
	next:
		for k, v := range h {
			for _, sk := range skip {
				if k == sk {
					continue next
				}
			}
			out = append(out, k, v)
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	zj, _ := json.Marshal(zs)
	dst := s.keys.CheckpointNS(to, ns)
	v, err := s.run(ctx, "agent_ckpt_copy", []string{s.keys.Checkpoints(to), dst[0], dst[1], dst[2], dst[3]},
		ns, last.Val(), s.retentionMS, string(zj), flat(data.Val(), "anchor", "anchor_w"), flat(ids.Val()), flat(writes.Val()))
	if err != nil {
		return fmt.Errorf("copy checkpoints of %s ns %q: %w", from, ns, err)
	}
	if _, _, err := reply(v); err != nil {
		return fmt.Errorf("copy checkpoints of %s ns %q to %s: %w", from, ns, to, err)
	}
	return nil
}
