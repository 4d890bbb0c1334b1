package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// record is what checkpoint.lua keeps in "<v>:i".
type record struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	Run    string `json:"run"`
	Node   string `json:"node"`
	Epoch  int64  `json:"epoch"`
	Worker string `json:"worker"`
	At     int64  `json:"at"`
}

// readCheckpoints reads the given versions of one namespace, in order,
// skipping any that were trimmed meanwhile.
func (s *Store) readCheckpoints(ctx context.Context, thread, ns string, versions []string) ([]Checkpoint, error) {
	if len(versions) == 0 {
		return nil, nil
	}
	fields := make([]string, 0, 3*len(versions))
	for _, v := range versions {
		fields = append(fields, v+":d", v+":m", v+":i")
	}
	vals, err := s.rdb.HMGet(ctx, s.keys.CheckpointNS(thread, ns)[1], fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s ns %q: %w", thread, ns, err)
	}
	out := make([]Checkpoint, 0, len(versions))
	for i, v := range versions {
		data, meta, info := asString(vals[3*i]), asString(vals[3*i+1]), asString(vals[3*i+2])
		if info == "" {
			continue
		}
		var rec record
		if err := json.Unmarshal([]byte(info), &rec); err != nil {
			return nil, fmt.Errorf("checkpoint %s ns %q v%s: %w", thread, ns, v, err)
		}
		version, _ := strconv.ParseInt(v, 10, 64)
		out = append(out, Checkpoint{Thread: thread, NS: ns, Version: version, ID: rec.ID, Parent: rec.Parent,
			Data: json.RawMessage(data), Metadata: json.RawMessage(meta), Run: rec.Run, Node: rec.Node,
			Epoch: rec.Epoch, Worker: rec.Worker, At: time.UnixMilli(rec.At)})
	}
	return out, nil
}

func checkThreadNS(thread, ns string) error {
	if err := ValidateID("thread", thread); err != nil {
		return err
	}
	return ValidateNS(ns)
}

// LatestCheckpoint returns the newest checkpoint of thread in ns, or
// ErrNoCheckpoint.
func (s *Store) LatestCheckpoint(ctx context.Context, thread, ns string) (*Checkpoint, error) {
	list, _, err := s.Checkpoints(ctx, thread, ns, 0, 1)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("thread %s ns %q: %w", thread, ns, ErrNoCheckpoint)
	}
	return &list[0], nil
}

// CheckpointByID returns the checkpoint of thread in ns named id, or
// ErrNoCheckpoint.
func (s *Store) CheckpointByID(ctx context.Context, thread, ns, id string) (*Checkpoint, error) {
	if err := checkThreadNS(thread, ns); err != nil {
		return nil, err
	}
	if err := ValidateID("checkpoint id", id); err != nil {
		return nil, err
	}
	v, err := s.rdb.HGet(ctx, s.keys.CheckpointNS(thread, ns)[2], id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("thread %s ns %q checkpoint %s: %w", thread, ns, id, ErrNoCheckpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("thread %s ns %q checkpoint %s: %w", thread, ns, id, err)
	}
	list, err := s.readCheckpoints(ctx, thread, ns, []string{v})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("thread %s ns %q checkpoint %s: %w", thread, ns, id, ErrNoCheckpoint)
	}
	return &list[0], nil
}

// Checkpoints lists up to limit checkpoints of thread in ns, newest first,
// with versions below before (0: from the newest). next is the cursor for
// the following page, 0 when there is none.
func (s *Store) Checkpoints(ctx context.Context, thread, ns string, before int64, limit int) (list []Checkpoint, next int64, err error) {
	if err := checkThreadNS(thread, ns); err != nil {
		return nil, 0, err
	}
	limit = max(1, min(limit, 1000))
	maxScore := "+inf"
	if before > 0 {
		maxScore = "(" + strconv.FormatInt(before, 10)
	}
	versions, err := s.rdb.ZRevRangeByScore(ctx, s.keys.CheckpointNS(thread, ns)[0], &redis.ZRangeBy{
		Max: maxScore, Min: "-inf", Count: int64(limit) + 1}).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoints of %s ns %q: %w", thread, ns, err)
	}
	more := len(versions) > limit
	if more {
		versions = versions[:limit]
	}
	list, err = s.readCheckpoints(ctx, thread, ns, versions)
	if err != nil {
		return nil, 0, err
	}
	if more && len(versions) > 0 {
		next, _ = strconv.ParseInt(versions[len(versions)-1], 10, 64)
	}
	return list, next, nil
}

// PendingWrites returns the writes stored against checkpoint id of thread
// in ns, by task and index.
func (s *Store) PendingWrites(ctx context.Context, thread, ns, id string) ([]PendingWrite, error) {
	if err := checkThreadNS(thread, ns); err != nil {
		return nil, err
	}
	keys := s.keys.CheckpointNS(thread, ns)
	v, err := s.rdb.HGet(ctx, keys[2], id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	raw, err := s.rdb.HGet(ctx, keys[1], v+":w").Result()
	if errors.Is(err, redis.Nil) || raw == "{}" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	var fields []string
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	vals, err := s.rdb.HMGet(ctx, keys[3], fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	out := make([]PendingWrite, 0, len(vals))
	for _, x := range vals {
		var w PendingWrite
		if err := json.Unmarshal([]byte(asString(x)), &w); err == nil {
			out = append(out, w)
		}
	}
	return out, nil
}

// CheckpointNamespaces returns the namespaces of thread that hold
// checkpoints, each with its newest version.
func (s *Store) CheckpointNamespaces(ctx context.Context, thread string) (map[string]int64, error) {
	if err := ValidateID("thread", thread); err != nil {
		return nil, err
	}
	names, err := s.rdb.HKeys(ctx, s.keys.Checkpoints(thread)).Result()
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", thread, err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(names))
	for i, ns := range names {
		cmds[i] = pipe.ZRevRange(ctx, s.keys.CheckpointNS(thread, ns)[0], 0, 0)
	}
	if len(names) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("checkpoints of %s: %w", thread, err)
		}
	}
	out := map[string]int64{}
	for i, ns := range names {
		if v := cmds[i].Val(); len(v) == 1 {
			out[ns], _ = strconv.ParseInt(v[0], 10, 64)
		}
	}
	return out, nil
}
