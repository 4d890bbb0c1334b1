package fence

import (
	"context"
	"strings"
	"sync/atomic"
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
// end a claim, when the node has limits.
func (s *Store) endLimitKeys(limits string) []string {
	names := limitKeyNames(limits)
	keys := make([]string, 0, 2*len(names))
	for _, k := range names {
		keys = append(keys, s.keys.LimitHolders(k), s.keys.LimitWaiters(k))
	}
	return keys
}

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
