package fence

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits on a Redis Cluster. A limit's keys ("{lim/KEY}") are in another
// slot than a node's, so no script can take a slot and claim the node in
// one atomic step there. A claim of a node with limits is three steps,
// each one script in one slot (docs/flow-control.md, "Redis Cluster"):
//
//  1. claim.lua on the node's slot, which answers, once the node is
//     claimable but for its limits, their keys and the node's last claim;
//  2. limit_take.lua on each limit key in key order, which records the
//     holder "claim@deadline" for the node's ref on the limit master's own
//     clock, moves the holder of the node's last claim (a takeover), or
//     queues the node as a waiter, or says when a rate's token is due;
//     when one key gives nothing, the slots taken are given back;
//  3. claim.lua again, which claims the node or records why it waits.
//
// The holder's deadline is the lease TTL and a half from the take; the
// lease is set to end a quarter TTL before it (leaseAfter), and a heartbeat
// extends every holder (limit_extend.lua) before it renews the lease, and
// renews it only if all were extended: a live lease never outlives its
// slots, and a slot whose holder died comes back at its deadline. Ending
// a claim (commit, fail, release, park, expiry) ends it on the node's slot
// and then frees its holders (limit_free.lua), which free only a holder
// naming that claim and hand the slot to the next waiter.

// onCluster reports whether the store talks to a Redis Cluster, where
// limits take the steps above.
func (s *Store) onCluster() bool {
	_, ok := s.rdb.(*redis.ClusterClient)
	return ok
}

// holdFor is how long a holder set now outlives a lease of ttl set after.
func holdFor(ttl time.Duration) time.Duration { return ttl + ttl/2 }

// leaseAfter is the TTL for a lease set after the holders were taken or
// extended at started (holdFor(ttl) from then, on the limit's master):
// ttl, less the time past a quarter of it that has gone by since. The
// lease then ends at started + 1.25 × ttl plus the call's one-way delay,
// before the holders while that delay stays under a quarter TTL. Times
// are durations on this process's monotonic clock; no two Redis clocks
// are compared. Zero or less: too late to set a lease.
func leaseAfter(ttl time.Duration, started time.Time) time.Duration {
	if over := time.Since(started) - ttl/4; over > 0 {
		return ttl - over
	}
	return ttl
}

// limitCost is one limit key of a node and the cost its claim takes.
type limitCost struct {
	key  string
	cost int64
}

// limitCosts parses a node's field limits ("k1=c1,k2=~c2"), in key order:
// every claim takes a node's keys in the same order.
func limitCosts(limits string) []limitCost {
	var out []limitCost
	for _, p := range strings.Split(limits, ",") {
		k, c, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimPrefix(c, "~"), 10, 64)
		out = append(out, limitCost{key: k, cost: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// clusterTake is what the takes of one claim gave.
type clusterTake struct {
	outcome string   // claim.lua's ARGV[11]: "", "limit:KEY", "rate:KEY:DELAY_MS"
	taken   []string // keys holding a slot for the claim, to give back if it fails
	started time.Time
}

// takeLimits takes the node's limits for claimID in their own slots
// (limit_take.lua), key by key, stopping at the first key that gives
// nothing and giving back the slots taken before it. last and queue are
// the node's last claim id and queue, as claim.lua named them. A holder
// of another claim of the node still live (a claim in flight) is a
// *NotDueError until it runs out, with nothing taken.
func (s *Store) takeLimits(ctx context.Context, n NodeRef, claimID, limits, last, queue string,
	ttl time.Duration) (clusterTake, error) {
	t := clusterTake{started: time.Now()}
	costs := limitCosts(limits)
	defs, err := s.limitDefsSeen(ctx, costs)
	if err != nil {
		return t, err
	}
	ref := n.Ref()
	for _, lc := range costs {
		// A limit deleted since the submit holds nothing back: its take
		// (all zero) only notes that the key holds no slot.
		l, _ := Resolve(defs, lc.key)
		// With ClaimReplicas, a take is held by replicas before the claim,
		// as the claim itself is (runReplicated).
		v, err := s.runReplicated(ctx, "limit_take", []string{s.keys.LimitHolders(lc.key), s.keys.LimitWaiters(lc.key),
			s.keys.LimitTAT(lc.key)}, ref, claimID, last, queue, ms(holdFor(ttl)), l.Concurrency, l.Rate,
			l.Period.Milliseconds(), l.Burst, lc.cost)
		if err != nil {
			// The take may have run: a claim retried with this claim id
			// finds it; else it runs out at its deadline.
			return t, fmt.Errorf("limit %s: %w", lc.key, err)
		}
		r, _ := v.([]any)
		if len(r) < 2 {
			return t, fmt.Errorf("limit %s: unexpected reply %v", lc.key, v)
		}
		if w, ok := r[1].([]any); ok {
			s.wakeAll(ctx, w)
		}
		switch asInt(r[0]) {
		case 1:
			// A holder names the claim now (a slot, or a takeover's moved
			// under a limit deleted since): a give-back must find it.
			if l.Concurrency > 0 || (len(r) > 2 && asInt(r[2]) == 1) {
				t.taken = append(t.taken, lc.key)
			}
			continue
		case 2:
			// The node waits under this key: a slot handed to it under an
			// earlier one is kept for it meanwhile (keys go in order, so no
			// two nodes keep what the other waits for).
			t.outcome = "limit:" + lc.key
			s.freeKeys(ctx, n, claimID, t.taken, nil, giveBackKeep)
			t.taken = nil
			return t, nil
		case 3:
			t.outcome = "rate:" + lc.key + ":" + strconv.FormatInt(asInt(r[1]), 10)
		default: // 4: a claim of this node in flight holds it
			s.giveBack(ctx, n, claimID, t.taken)
			return clusterTake{}, &NotDueError{ReadyAt: time.Now().Add(time.Duration(asInt(r[1])) * time.Millisecond)}
		}
		s.giveBack(ctx, n, claimID, t.taken)
		t.taken = nil
		return t, nil
	}
	return t, nil
}

// limitDefsSeen reads the limit definitions and marks the keys seen (the
// listing's index of keys, scored by this process's clock: a listing
// aid, never compared with a lease) in one round trip.
func (s *Store) limitDefsSeen(ctx context.Context, costs []limitCost) ([]Limit, error) {
	pipe := s.rdb.Pipeline()
	defs := pipe.HGetAll(ctx, s.keys.LimitDefs())
	now := float64(time.Now().UnixMilli())
	for _, lc := range costs {
		pipe.ZAdd(ctx, s.keys.LimitSeen(), redis.Z{Score: now, Member: lc.key})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read limits: %w", err)
	}
	out := make([]Limit, 0, len(defs.Val()))
	for name, v := range defs.Val() {
		if l, ok := decodeLimit(name, v); ok {
			out = append(out, l)
		}
	}
	return out, nil
}

// giveBack gives back the slots claimID holds under keys (limit_free.lua),
// in one pipeline: the claim did not happen. A holder its take moved (a
// takeover's, whose owner may have renewed its lease between the steps;
// a slot handed to the node) is put back as it was; one it took is freed
// and handed on. An error leaves a holder that runs out at its deadline.
func (s *Store) giveBack(ctx context.Context, n NodeRef, claimID string, keys []string) {
	mode := ""
	if claimID != "" {
		mode = giveBackRestore
	}
	s.freeKeys(ctx, n, claimID, keys, nil, mode)
}

// limit_free.lua's ARGV[7]: how a give-back treats what its take moved.
const (
	giveBackRestore = "1" // put it back as it was
	giveBackKeep    = "2" // the same, and a slot handed to the node is kept for it while it waits under a later key
)

// rateCharge is a cost to charge to one limit's rate (limit_free.lua).
type rateCharge struct{ delta, rate, periodMS int64 }

// freeKeys frees the slots claimID holds under keys and hands them on,
// charging charge[key] to the rate of each key that has one; a give-back
// mode puts back what the claim's take moved instead (giveBack).
func (s *Store) freeKeys(ctx context.Context, n NodeRef, claimID string, keys []string, charge map[string]rateCharge, mode string) {
	if len(keys) == 0 {
		return
	}
	ref := n.Ref()
	cmds := s.runEach(ctx, "limit_free", len(keys), func(i int) ([]string, []any) {
		k := keys[i]
		c := charge[k]
		return []string{s.keys.LimitHolders(k), s.keys.LimitWaiters(k), s.keys.LimitTAT(k)},
			[]any{ref, claimID, "", c.delta, c.rate, c.periodMS, mode}
	})
	for _, c := range cmds {
		if r, ok := c.Val().([]any); ok && len(r) > 2 {
			if w, ok := r[2].([]any); ok {
				s.wakeAll(ctx, w)
			}
		}
	}
}

// freeClustered frees the slots l's claim holds, after the script that
// ended the claim on the node's slot, and hands them on. Only a holder
// naming l.ClaimID is freed, so a stale owner's free, or a replayed one,
// frees nothing. An error (or a crash before this call) leaves holders
// that run out at their deadline, a TTL and a half after the last
// heartbeat.
//
// sp is the cost the attempt reported: its difference from the claim's
// cost is charged to each limit the node named with a cost, in the same
// call, unless replay says the end was a replay (a commit resent after a
// lost reply, which charged at its first try). A fail has no such answer:
// a fail resent after a lost reply charges again (fewer claims admitted,
// never more).
func (s *Store) freeClustered(ctx context.Context, l Lease, sp Spend, replay bool) {
	if l.Limits == "" || !s.onCluster() {
		return
	}
	var charge map[string]rateCharge
	if sp.Reported && !replay && Metered(l.Limits) && CheckSpend(sp.Cost) == nil {
		// The rates are read now (one round trip, only when a cost was
		// reported); a read that fails charges nothing: the claim's cost
		// stands.
		if defs, err := s.Limits(ctx); err == nil {
			charge = map[string]rateCharge{}
			for _, p := range strings.Split(l.Limits, ",") {
				k, c, _ := strings.Cut(p, "=")
				cost, metered := strings.CutPrefix(c, "~")
				took, _ := strconv.ParseInt(cost, 10, 64)
				if d, ok := Resolve(defs, k); metered && ok && d.Rate > 0 && sp.Cost != took {
					charge[k] = rateCharge{sp.Cost - took, int64(d.Rate), d.Period.Milliseconds()}
				}
			}
		}
	}
	s.freeKeys(ctx, NodeRef{Thread: l.Thread, Run: l.Run, Node: l.Node}, l.ClaimID, limitKeyNames(l.Limits), charge, "")
}

// extendClustered extends, before a heartbeat on a Redis Cluster, the holders of every beat
// with limits (limit_extend.lua), in one pipeline. errs[i] is set for a
// beat whose slot is lost (wrapping ErrNotOwner: its lease must not be
// renewed) or could not be extended; the others' leases are renewed with
// the TTL the returned start gives (leaseAfter).
func (s *Store) extendClustered(ctx context.Context, beats []Beat, ttl time.Duration) (time.Time, []error) {
	started := time.Now()
	errs := make([]error, len(beats))
	type call struct {
		beat int
		key  string
	}
	var calls []call
	for i, b := range beats {
		for _, k := range limitKeyNames(b.Lease.Limits) {
			calls = append(calls, call{i, k})
		}
	}
	if len(calls) == 0 {
		return started, errs
	}
	cmds := s.runEach(ctx, "limit_extend", len(calls), func(i int) ([]string, []any) {
		l := beats[calls[i].beat].Lease
		return []string{s.keys.LimitHolders(calls[i].key), s.keys.LimitWaiters(calls[i].key)},
			[]any{l.Ref(), l.ClaimID, ms(holdFor(ttl))}
	})
	for i, c := range cmds {
		b := calls[i].beat
		if errs[b] != nil {
			continue
		}
		v, err := c.Result()
		r, _ := v.([]any)
		switch {
		case err != nil:
			errs[b] = fmt.Errorf("heartbeat %s: limit %s: %w", beats[b].Lease, calls[i].key, err)
		case len(r) == 0:
			errs[b] = fmt.Errorf("heartbeat %s: limit %s: unexpected reply %v", beats[b].Lease, calls[i].key, v)
		case asInt(r[0]) != 1:
			errs[b] = fmt.Errorf("heartbeat %s: %w: %s", beats[b].Lease, ErrNotOwner, &LimitLostError{Key: calls[i].key})
		}
	}
	return started, errs
}

// LimitLostError says which limit's slot a claim lost on a Redis Cluster:
// its holder ran out (the worker was paused past it) or a takeover moved
// it. The heartbeat that found it wraps ErrNotOwner: the lease is lost.
type LimitLostError struct{ Key string }

func (e *LimitLostError) Error() string { return "slot of limit " + e.Key + " lost" }

// limitUseClustered reads what is in use under keys, each on its own
// master's clock (limit_use.lua), in one pipeline.
func (s *Store) limitUseClustered(ctx context.Context, l Limit, keys []string) ([]LimitKeyState, error) {
	cmds := s.runEach(ctx, "limit_use", len(keys), func(i int) ([]string, []any) {
		return []string{s.keys.LimitHolders(keys[i]), s.keys.LimitWaiters(keys[i]), s.keys.LimitTAT(keys[i])}, nil
	})
	out := make([]LimitKeyState, len(keys))
	var errs []error
	for i, c := range cmds {
		out[i].Key = keys[i]
		v, err := c.Result()
		r, _ := v.([]any)
		if err == nil && len(r) < 4 {
			err = fmt.Errorf("unexpected reply %v", v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("limit %s: %w", keys[i], err))
			continue
		}
		out[i].InUse, out[i].Waiting = int(asInt(r[0])), int(asInt(r[1]))
		if l.Rate > 0 {
			tat, _ := strconv.ParseFloat(asString(r[2]), 64)
			now, _ := strconv.ParseFloat(asString(r[3]), 64)
			n := tokensLeft(l, tat, now)
			out[i].Tokens = &n
		}
	}
	return out, errors.Join(errs...)
}
