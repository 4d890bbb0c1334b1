package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// WorkerHealth is what a runner's heartbeater knew when the runner last
// refreshed its advertisement. It lets an operator see a runner that is
// about to lose its leases before it does: a slow renewal round trip, a
// thin margin, or a runner that stopped renewing at all.
type WorkerHealth struct {
	// Running are the attempts it holds a lease for.
	Running []RunningNode `json:"running"`
	// RenewedAt is when its last successful heartbeat tick started
	// (runner clock); zero before the first.
	RenewedAt time.Time `json:"renewed_at,omitzero"`
	// RTTMs is that tick's pipeline round trip, in milliseconds.
	RTTMs float64 `json:"rtt_ms"`
	// MarginMs is the least lease time that was left, over the leases that
	// tick renewed, when Redis renewed them: the baton_lease_left_seconds
	// metric's latest low point.
	MarginMs int64 `json:"margin_ms"`
	// LeaseUntil is the earliest deadline of its leases as last renewed
	// (Redis time); zero when it holds none.
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// RunningNode is one attempt a runner holds a lease for.
type RunningNode struct {
	Run   string `json:"run"`
	Node  string `json:"node"`
	Epoch int64  `json:"epoch"`
}

// FleetEntry is one runner of Fleet: its last advertisement and whether
// that expired without a refresh (a runner that crashed, was paused or
// lost Redis). A runner that stopped gracefully withdrew and is not
// listed.
type FleetEntry struct {
	WorkerInfo
	ExpiresAt time.Time `json:"expires_at"`
	// Expired: the advertisement's life ended; WorkerInfo is then the
	// last one the runner wrote (kept an hour), or only its ID.
	Expired bool `json:"expired,omitempty"`
}

// lastAdKey keeps a runner's last advertisement for an hour after it
// expires, so that the fleet view can say what a lost runner ran. It
// extends the advertisement's key, so it shares its slot.
func (s *Store) lastAdKey(id string) string { return s.keys.Worker(id) + ":last" }

// Fleet lists every runner advertised within the last hour, live or not,
// by id: two round trips. Workers lists the live ones only.
func (s *Store) Fleet(ctx context.Context) ([]FleetEntry, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, s.keys.Workers(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	out := make([]FleetEntry, 0, len(zs))
	if len(zs) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(zs))
	last := make([]*redis.StringCmd, len(zs))
	for i, z := range zs {
		id, _ := z.Member.(string)
		cmds[i] = pipe.Get(ctx, s.keys.Worker(id))
		last[i] = pipe.Get(ctx, s.lastAdKey(id))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	now := time.Now()
	for i, z := range zs {
		id, _ := z.Member.(string)
		e := FleetEntry{ExpiresAt: time.UnixMilli(int64(z.Score))}
		b, err := cmds[i].Bytes()
		switch {
		case err == nil && json.Unmarshal(b, &e.WorkerInfo) == nil:
			e.Expired = now.After(e.ExpiresAt)
		default:
			e.Expired, e.WorkerInfo = true, WorkerInfo{}
			if b, err := last[i].Bytes(); err == nil {
				_ = json.Unmarshal(b, &e.WorkerInfo)
			}
			e.ID = id
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b FleetEntry) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
