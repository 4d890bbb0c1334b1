package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// WorkerInfo is what a runner advertises: which kinds it runs on which
// queues. Advertisements are refreshed periodically and expire on their
// own, so the listing shows the runners alive now. Routing never depends
// on them (claim.lua refuses a kind the claimer lacks); they say why a
// node waits.
type WorkerInfo struct {
	ID          string    `json:"id"`
	Kinds       []string  `json:"kinds"`
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	SeenAt      time.Time `json:"seen_at"` // when the advertisement was last refreshed
	// LeaseTTLMs and AdvertiseEveryMs are the runner's lease TTL and how
	// often it refreshes this advertisement: a reader judges a runner that
	// went silent by them (see fleet.go). Zero from runners that predate
	// them.
	LeaseTTLMs       int64 `json:"lease_ttl_ms,omitempty"`
	AdvertiseEveryMs int64 `json:"advertise_every_ms,omitempty"`
	// Health is the runner's heartbeater at the last refresh: its running
	// nodes, renewal round trip and lease margin. Nil from runners that
	// predate it.
	Health *WorkerHealth `json:"health,omitempty"`
	// Jobs is what the runner lets its jobs reach (package jobpolicy's
	// Rules, as JSON), published so that every submit refuses at once
	// what the runner would refuse when a node runs. Absent: the runner
	// published nothing, and its nodes are checked when they run.
	Jobs json.RawMessage `json:"jobs,omitempty"`
}

// Serves reports whether the worker runs kind on queue.
func (w WorkerInfo) Serves(kind, queue string) bool {
	return slices.Contains(w.Kinds, kind) && slices.Contains(w.Queues, queue)
}

// Advertise writes w's advertisement, live for ttl (Redis expires it).
func (s *Store) Advertise(ctx context.Context, w WorkerInfo, ttl time.Duration) error {
	b, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("advertise %s: %w", w.ID, err)
	}
	now := time.Now()
	pipe := s.rdb.Pipeline()
	pipe.Set(ctx, s.keys.Worker(w.ID), b, ttl)
	pipe.Set(ctx, s.lastAdKey(w.ID), b, time.Hour) // fleet.go: a lost runner's last word
	pipe.ZAdd(ctx, s.keys.Workers(), redis.Z{Score: float64(now.Add(ttl).UnixMilli()), Member: w.ID})
	// Entries of runners gone for an hour are dropped; Workers skips the
	// expired ones before that.
	pipe.ZRemRangeByScore(ctx, s.keys.Workers(), "-inf", strconv.FormatInt(now.Add(-time.Hour).UnixMilli(), 10))
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("advertise %s: %w", w.ID, err)
	}
	return nil
}

// Withdraw removes w's advertisement (a runner that stops).
func (s *Store) Withdraw(ctx context.Context, id string) error {
	pipe := s.rdb.Pipeline()
	// One key per DEL: on a cluster the two are in different slots.
	pipe.Del(ctx, s.keys.Worker(id))
	pipe.Del(ctx, s.lastAdKey(id))
	pipe.ZRem(ctx, s.keys.Workers(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("withdraw %s: %w", id, err)
	}
	return nil
}

// Workers lists the live advertisements, by id.
func (s *Store) Workers(ctx context.Context) ([]WorkerInfo, error) {
	ids, err := s.rdb.ZRange(ctx, s.keys.Workers(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	if len(ids) == 0 {
		return []WorkerInfo{}, nil
	}
	slices.Sort(ids)
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, s.keys.Worker(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("workers: %w", err)
	}
	out := []WorkerInfo{}
	for _, c := range cmds {
		var w WorkerInfo
		if b, err := c.Bytes(); err == nil && json.Unmarshal(b, &w) == nil {
			out = append(out, w)
		}
	}
	return out, nil
}

// Unserved says why a node of kind on queue waits when no worker in live
// serves it: "no runner serves kind summarize on queue default"; "" when
// one does.
func Unserved(live []WorkerInfo, kind, queue string) string {
	for _, w := range live {
		if w.Serves(kind, queue) {
			return ""
		}
	}
	why := fmt.Sprintf("no runner serves kind %s on queue %s", kind, queue)
	if near := nearestKind(live, kind); near != "" {
		why += " (did you mean " + near + "?)"
	}
	return why
}

// nearestKind is the kind a live runner serves that is closest to kind, at
// most two edits away (a typo: "exce" for "exec"), or "".
func nearestKind(live []WorkerInfo, kind string) string {
	best, bestD := "", 3
	for _, w := range live {
		for _, k := range w.Kinds {
			if d := editDistance(kind, k); d > 0 && d < bestD {
				best, bestD = k, d
			}
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance of a and b (optimal
// string alignment: an adjacent swap counts one edit).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// MarkUnserved records that a node was reported unserved; it returns true
// only the first time (within ttl), so a fleet of sweepers warns once.
func (s *Store) MarkUnserved(ctx context.Context, n NodeRef, ttl time.Duration) (bool, error) {
	ok, err := s.rdb.SetNX(ctx, s.keys.Unserved(n.Ref()), 1, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("mark unserved %s: %w", n, err)
	}
	return ok, nil
}
