package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Woken is a node a freed slot was handed to: the caller that freed it
// enqueues its delivery (Store.SetWake).
type Woken struct {
	Node  NodeRef
	Queue string
}

// LimitWaitError is returned (wrapping ErrLimitWait) by a claim that found
// no free slot under Key: nothing was claimed or counted.
type LimitWaitError struct{ Key string }

func (e *LimitWaitError) Error() string { return ErrLimitWait.Error() + " " + e.Key }
func (e *LimitWaitError) Unwrap() error { return ErrLimitWait }

// SetWake sets what the store calls with the nodes a script handed a freed
// slot to, right after that script's reply: the runner enqueues their
// deliveries. Nil (the default) leaves them to the sweeper's recheck of
// waiting nodes (after about 30 s).
func (s *Store) SetWake(fn func(context.Context, []Woken)) { s.wake.Store(&fn) }

type wakeFunc = atomic.Pointer[func(context.Context, []Woken)]

// limitKeyNames lists a node's limit keys from its field ("k=c,...").
func limitKeyNames(limits string) []string {
	if limits == "" {
		return nil
	}
	parts := strings.Split(limits, ",")
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		out = append(out, k)
	}
	return out
}

// claimLimitKeys are claim.lua's keys after its fixed ones.
func (s *Store) claimLimitKeys(limits string) []string {
	names := limitKeyNames(limits)
	keys := make([]string, 0, 2+3*len(names))
	keys = append(keys, s.keys.LimitDefs(), s.keys.LimitSeen())
	for _, k := range names {
		keys = append(keys, s.keys.LimitHolders(k), s.keys.LimitWaiters(k), s.keys.LimitTAT(k))
	}
	return keys
}

// endLimitKeys are the keys that follow the others of the scripts that
// end a claim, when the node has limits: each limit's holders and
// waiters; with a reported spend, then the definitions hash and each
// limit's rate state (lib/limits.lua chargeSpend).
func (s *Store) endLimitKeys(limits string, sp Spend) []string {
	names := limitKeyNames(limits)
	if len(names) == 0 || s.onCluster() {
		return nil // a Redis Cluster's are freed in their own slots (freeClustered)
	}
	keys := make([]string, 0, 3*len(names)+1)
	for _, k := range names {
		keys = append(keys, s.keys.LimitHolders(k), s.keys.LimitWaiters(k))
	}
	if sp.Reported {
		keys = append(keys, s.keys.LimitDefs())
		for _, k := range names {
			keys = append(keys, s.keys.LimitTAT(k))
		}
	}
	return keys
}

// cancelLimitKeys are the keys a cancel (cancel.lua, timeout.lua,
// submit.lua's interrupt and rollback) asked for with -31: the holders
// and waiters of each limit key of names ("k1,k2").
func (s *Store) cancelLimitKeys(names string) []string {
	var keys []string
	for _, k := range strings.Split(names, ",") {
		if k != "" {
			keys = append(keys, s.keys.LimitHolders(k), s.keys.LimitWaiters(k))
		}
	}
	return keys
}

// nodesLimitKeys are the holders and waiters of every limit key the
// nodes ids of a run name, read in one pipeline, for a submit that
// cancels that run (interrupt, rollback): a slot handed to one of its
// READY nodes then goes to the next waiter in the submit's script. None
// on a Redis Cluster, where they live in other slots (the submit's
// script passes over them; limitcluster.go).
func (s *Store) nodesLimitKeys(ctx context.Context, thread, run string, ids []string) ([]string, error) {
	if len(ids) == 0 || s.onCluster() {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGet(ctx, s.keys.Node(thread, run, id), "limits")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, c := range cmds {
		for _, k := range limitKeyNames(c.Val()) {
			if !seen[k] {
				seen[k] = true
				names = append(names, k)
			}
		}
	}
	return s.cancelLimitKeys(strings.Join(names, ",")), nil
}

// MaxSpend bounds a reported cost, as a spec bounds a node's (2^40).
const MaxSpend = 1 << 40

// Spend is the cost an attempt reported once it learned it (a model's
// token count: runner.Task.Spend, an exec node's "::spend N"). The
// claim took the cost the spec names from every rate limit the node
// named; the commit or fail that ends the attempt charges Cost minus that
// cost to (or refunds it from) each limit the node named with a cost
// ({"name": ..., "cost": N}), on Redis's clock, in its own script. Limits
// named by name alone count claims and are not touched. A stale owner's
// end is fenced and charges nothing; a replay (lost reply) charges
// nothing again. The zero value reports nothing: the claim's cost stands.
type Spend struct {
	Cost     int64 // 0 to MaxSpend
	Reported bool
}

// CheckSpend validates a reported cost: a whole number from 0 to
// MaxSpend (ErrInvalidData otherwise, naming what is wrong).
func CheckSpend(n int64) error {
	if n < 0 || n > MaxSpend {
		return fmt.Errorf("%w: spend %d: want a whole number from 0 to 2^40", ErrInvalidData, n)
	}
	return nil
}

// arg is the scripts' ARGV for the spend: "" for none, or one out of
// range (the scripts ignore what they cannot read, too).
func (sp Spend) arg() string {
	if !sp.Reported || CheckSpend(sp.Cost) != nil {
		return ""
	}
	return strconv.FormatInt(sp.Cost, 10)
}

// Metered reports whether a node's limits (Lease.Limits) name a limit with a
// cost, which a reported spend charges; without one, a spend changes
// nothing.
func Metered(limits string) bool { return strings.Contains(limits, "=~") }

// takeWakes strips the trailing {woken...} a script may append to its
// reply and hands the woken nodes to the wake function.
func (s *Store) takeWakes(ctx context.Context, v any) any {
	r, ok := v.([]any)
	if !ok || len(r) < 2 {
		return v
	}
	last, ok := r[len(r)-1].([]any)
	if !ok {
		return v
	}
	s.wakeAll(ctx, last)
	return r[:len(r)-1]
}

func (s *Store) wakeAll(ctx context.Context, list []any) {
	var woken []Woken
	for _, m := range list {
		ref, queue, _ := strings.Cut(asString(m), "|")
		if t, r, n, ok := ParseRef(ref); ok {
			woken = append(woken, Woken{Node: NodeRef{Thread: t, Run: r, Node: n}, Queue: queue})
		}
	}
	if fn := s.wake.Load(); fn != nil && *fn != nil && len(woken) > 0 {
		(*fn)(ctx, woken)
	}
}
