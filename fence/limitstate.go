package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// LimitState is a limit with what is in use under it now: one entry per
// key (a prefix rule has one per key it covered lately).
type LimitState struct {
	Limit
	Keys []LimitKeyState
}

// LimitKeyState is one limit key's use, read at one moment.
type LimitKeyState struct {
	Key string `json:"key"`
	// InUse: concurrency slots held by claims, or handed to a woken
	// waiter that has not claimed yet.
	InUse int `json:"in_use"`
	// Waiting: nodes READY and waiting for a slot, first come first served.
	Waiting int `json:"waiting"`
	// Tokens: claims the rate allows at once now (up to burst+1); nil
	// without a rate.
	Tokens *int64 `json:"tokens,omitempty"`
}

// MarshalJSON writes the limit's fields (Limit's form) and its keys.
func (s LimitState) MarshalJSON() ([]byte, error) {
	keys := s.Keys
	if keys == nil {
		keys = []LimitKeyState{}
	}
	return json.Marshal(struct {
		limitJSON
		Keys []LimitKeyState `json:"keys"`
	}{limitJSON{Name: s.Name, Concurrency: s.Concurrency, Rate: s.RateString(), Burst: s.Burst}, keys})
}

// Total is a limit's use over all its keys, as one figure: slots in use
// and nodes waiting added up, and tokens the fewest any key has (burst+1,
// what a fresh key has, when none was used lately); Tokens is nil without
// a rate. For a plain limit it is its one key's use.
func (s LimitState) Total() LimitKeyState {
	t := LimitKeyState{Key: s.Name}
	for _, k := range s.Keys {
		t.InUse += k.InUse
		t.Waiting += k.Waiting
	}
	if s.Rate > 0 {
		n := int64(s.Burst + 1)
		for _, k := range s.Keys {
			if k.Tokens != nil {
				n = min(n, *k.Tokens)
			}
		}
		t.Tokens = &n
	}
	return t
}

// maxRuleKeys bounds the keys of one prefix rule a listing reads.
const maxRuleKeys = 200

// LimitStates returns every limit with the use of its keys, read in one
// round trip after the definitions and the index of keys seen.
func (s *Store) LimitStates(ctx context.Context) ([]LimitState, error) {
	limits, err := s.Limits(ctx)
	if err != nil || len(limits) == 0 {
		return []LimitState{}, err
	}
	var seen []string
	for _, l := range limits {
		if strings.HasSuffix(l.Name, "*") {
			if seen, err = s.rdb.ZRevRange(ctx, s.keys.LimitSeen(), 0, 10*maxRuleKeys-1).Result(); err != nil {
				return nil, fmt.Errorf("read limit keys: %w", err)
			}
			break
		}
	}
	out := make([]LimitState, len(limits))
	if s.onCluster() {
		// Each key's use is read on its own master's clock (limit_use.lua):
		// a holder there counts while its deadline has not passed.
		var errs []error
		for i, l := range limits {
			out[i].Limit = l
			keys, err := s.limitUseClustered(ctx, l, ruleKeys(limits, l, seen))
			out[i].Keys = keys
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("read limit use: %w", err)
		}
		return out, nil
	}
	type cmds struct {
		h, w *redis.IntCmd
		t    *redis.StringCmd
	}
	var all [][]cmds
	pipe := s.rdb.Pipeline()
	tm := pipe.Time(ctx)
	for i, l := range limits {
		out[i].Limit = l
		keys := ruleKeys(limits, l, seen)
		cs := make([]cmds, len(keys))
		for j, k := range keys {
			out[i].Keys = append(out[i].Keys, LimitKeyState{Key: k})
			cs[j] = cmds{pipe.HLen(ctx, s.keys.LimitHolders(k)), pipe.ZCard(ctx, s.keys.LimitWaiters(k)), pipe.Get(ctx, s.keys.LimitTAT(k))}
		}
		all = append(all, cs)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, fmt.Errorf("read limit use: %w", err)
	}
	now := float64(tm.Val().UnixMicro()) / 1000
	for i := range out {
		for j, c := range all[i] {
			k := &out[i].Keys[j]
			k.InUse, k.Waiting = max(int(c.h.Val())-1, 0), int(c.w.Val()) // "~c" holds the limit, not a slot
			if l := out[i].Limit; l.Rate > 0 {
				tat, _ := strconv.ParseFloat(c.t.Val(), 64)
				n := tokensLeft(l, tat, now)
				k.Tokens = &n
			}
		}
	}
	return out, nil
}

// ruleKeys are the keys l governs: its own name, or for a prefix rule
// the keys seen lately (newest first) that it governs, up to maxRuleKeys.
func ruleKeys(limits []Limit, l Limit, seen []string) []string {
	rule, ok := strings.CutSuffix(l.Name, "*")
	if !ok {
		return []string{l.Name}
	}
	var keys []string
	for _, k := range seen {
		if strings.HasPrefix(k, rule) && len(keys) < maxRuleKeys {
			if r, _ := Resolve(limits, k); r.Name == l.Name {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// tokensLeft is how many claims of cost 1 the GCRA state tat allows at
// now (ms): burst+1 when idle.
func tokensLeft(l Limit, tat, now float64) int64 {
	t := float64(l.Period.Milliseconds()) / float64(l.Rate)
	backlog := math.Max(tat-now, 0)
	n := math.Floor((float64(l.Burst)*t-backlog)/t) + 1
	return int64(math.Max(0, math.Min(n, float64(l.Burst+1))))
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (s *LimitState) UnmarshalJSON(b []byte) error {
	var j struct {
		Keys []LimitKeyState `json:"keys"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var l limitJSON
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	out := LimitState{Limit: Limit{Name: l.Name, Concurrency: l.Concurrency, Burst: l.Burst}, Keys: j.Keys}
	if l.Rate != "" {
		n, p, err := ParseRate(l.Rate)
		if err != nil {
			return err
		}
		out.Rate, out.Period = n, p
	}
	*s = out
	return nil
}

// limitWaiting words a READY node's field "waits" (claim.lua): the limit
// it waits for; "" when it waits for none.
func limitWaiting(waits string, readyAt *time.Time) string {
	kind, key, ok := strings.Cut(waits, ":")
	switch {
	case !ok:
		return ""
	case kind == "limit":
		return "waiting: for a slot of limit " + key + " (first come, first served)"
	case kind == "rate" && readyAt != nil && readyAt.After(time.Now()):
		return "waiting: rate limit " + key + " until " + readyAt.UTC().Format(time.RFC3339Nano)
	}
	return ""
}
