package fence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Run-completion webhooks ("notify" in a run spec) are recorded here and
// delivered by package runner. The record is written before the run is
// stored and its pending entry is removed only once a delivery task has
// been enqueued, so a notification accepted with a run is never dropped
// silently: if the process that ended the run dies, the next runner's
// scan of the pending index finds it.
//
//	{shard}:<thread>:notify:<run>   hash: url, armed_at, delivered_at,
//	                                attempts, last_error, last_status
//	{shard}:notify                  zset: "thread:run:" -> ms armed
//
// The pending index is per shard, like the sweeper's indexes, so that
// arming a run's webhook is one transaction in one slot: a trigger, never
// authority.

// Notify is a run's webhook record.
func (k Keys) Notify(thread, run string) string { return k.tagged(thread, "notify", run) }

// NotifyPending indexes the shard's runs whose webhook is not yet queued
// for delivery.
func (k Keys) NotifyPending(shard int) string { return k.index(shard, "notify") }

// NotifyRecord is a run's webhook and how its delivery went.
type NotifyRecord struct {
	URL         string
	DeliveredAt time.Time // zero until a delivery was answered 2xx
	Attempts    int64
	LastError   string
}

// ArmNotify records that run (of thread) notifies url when it ends, before
// the run is stored. created is false when a record existed (a resubmit):
// the first URL stays. A run that is then refused (a conflict) should
// DisarmNotify what ArmNotify created.
func (s *Store) ArmNotify(ctx context.Context, thread, run, url string) (created bool, err error) {
	key := s.keys.Notify(thread, run)
	pipe := s.rdb.TxPipeline()
	set := pipe.HSetNX(ctx, key, "url", url)
	pipe.HSetNX(ctx, key, "armed_at", strconv.FormatInt(time.Now().UnixMilli(), 10))
	pipe.ZAddNX(ctx, s.keys.NotifyPending(ShardOf(thread)), redis.Z{Score: float64(time.Now().UnixMilli()), Member: Ref(thread, run, "")})
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("notify %s: %w", run, err)
	}
	return set.Val(), nil
}

// DisarmNotify deletes a run's webhook record and its pending entry.
func (s *Store) DisarmNotify(ctx context.Context, thread, run string) error {
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, s.keys.Notify(thread, run))
	pipe.ZRem(ctx, s.keys.NotifyPending(ShardOf(thread)), Ref(thread, run, ""))
	_, err := pipe.Exec(ctx)
	return err
}

// PendingNotify is a run whose webhook is not queued yet, with its status
// ("" when the run no longer exists).
type PendingNotify struct {
	Thread, Run, Status string
	ArmedAt             time.Time
}

// PendingNotifies returns up to limit runs whose webhook is not queued
// yet, oldest first, with their statuses: two round trips (per Redis
// node), whatever the number of shards.
func (s *Store) PendingNotifies(ctx context.Context, limit int64) ([]PendingNotify, error) {
	pipe := s.rdb.Pipeline()
	shards := make([]*redis.ZSliceCmd, Shards)
	for i := range shards {
		shards[i] = pipe.ZRangeWithScores(ctx, s.keys.NotifyPending(i), 0, limit-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("pending notifies: %w", err)
	}
	var members []redis.Z
	for _, c := range shards {
		members = append(members, c.Val()...)
	}
	slices.SortFunc(members, func(a, b redis.Z) int { return cmp.Compare(a.Score, b.Score) })
	members = members[:min(int64(len(members)), limit)]
	if len(members) == 0 {
		return nil, nil
	}
	out := make([]PendingNotify, 0, len(members))
	pipe = s.rdb.Pipeline()
	var cmds []*redis.StringCmd
	for _, m := range members {
		thread, run, _, ok := ParseRef(asString(m.Member))
		if !ok {
			continue
		}
		out = append(out, PendingNotify{Thread: thread, Run: run, ArmedAt: time.UnixMilli(int64(m.Score))})
		cmds = append(cmds, pipe.HGet(ctx, s.keys.Run(thread, run), "status"))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("pending notifies: %w", err)
	}
	for i := range out {
		out[i].Status = cmds[i].Val()
		if out[i].Status == "" { // packed into one key (retain.lua), or gone
			p, err := s.packedOf(ctx, out[i].Thread, out[i].Run)
			if err != nil {
				return nil, fmt.Errorf("pending notifies: %w", err)
			}
			if p != nil {
				out[i].Status = p.Run["status"]
			}
		}
	}
	return out, nil
}

// NotifyQueued takes runs off the pending index once their delivery task
// is enqueued (or the run is gone).
func (s *Store) NotifyQueued(ctx context.Context, runs []PendingNotify) error {
	if len(runs) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, r := range runs {
		pipe.ZRem(ctx, s.keys.NotifyPending(ShardOf(r.Thread)), Ref(r.Thread, r.Run, ""))
	}
	_, err := pipe.Exec(ctx)
	return err
}

// NotifyRecordOf reads a run's webhook record; ErrNotFound when it has
// none.
func (s *Store) NotifyRecordOf(ctx context.Context, thread, run string) (NotifyRecord, error) {
	h, err := s.rdb.HGetAll(ctx, s.keys.Notify(thread, run)).Result()
	if err != nil {
		return NotifyRecord{}, fmt.Errorf("notify %s: %w", run, err)
	}
	if h["url"] == "" {
		return NotifyRecord{}, fmt.Errorf("notify %s: %w", run, ErrNotFound)
	}
	rec := NotifyRecord{URL: h["url"], Attempts: asInt(h["attempts"]), LastError: h["last_error"]}
	if d := h["delivered_at"]; d != "" {
		rec.DeliveredAt = msTime(d)
	}
	return rec, nil
}

// NotifyAttempt records one delivery attempt: delivered (answered 2xx) or
// its error. A delivered record expires after ttl (ttl < 0: never), like
// the run's keys.
func (s *Store) NotifyAttempt(ctx context.Context, thread, run string, delivered bool, errMsg string, ttl time.Duration) error {
	key := s.keys.Notify(thread, run)
	pipe := s.rdb.TxPipeline()
	pipe.HIncrBy(ctx, key, "attempts", 1)
	if delivered {
		pipe.HSet(ctx, key, "delivered_at", strconv.FormatInt(time.Now().UnixMilli(), 10))
		if ttl >= 0 {
			pipe.Expire(ctx, key, ttl)
		}
	} else {
		pipe.HSet(ctx, key, "last_error", errMsg)
	}
	_, err := pipe.Exec(ctx)
	return err
}
