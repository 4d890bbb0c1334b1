package fence

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/scripts/lua"
)

// Admitter decides, at a service that performs side effects, whether a
// fencing token may act on its resource. Guard and MemoryGuard implement it;
// GuardHTTP takes one.
type Admitter interface {
	// Admit returns nil when tok may act, an error wrapping ErrStaleEpoch
	// or ErrNotOwner when a newer owner has been seen, and ErrInvalidID
	// when the token is malformed. Any other error means the guard could
	// not decide (Redis unreachable): the caller must not act.
	Admit(ctx context.Context, tok Token) error
}

var (
	_ Admitter = (*Guard)(nil)
	_ Admitter = (*MemoryGuard)(nil)
)

// GuardOptions configures a Guard. A nil *GuardOptions takes every default.
type GuardOptions struct {
	// Prefix starts every record's key: Prefix + ":" + run + "~" +
	// incarnation + ":" + node.
	// Zero value: "baton:guard".
	Prefix string
	// TTL is how long a resource's record outlives the last token it
	// admitted. Once it expires the guard has forgotten the resource and
	// admits any epoch, so make it longer than any run lasts. Zero value:
	// 7 days. Negative: records never expire.
	TTL time.Duration
}

// DefaultGuardTTL is GuardOptions.TTL's zero value.
const DefaultGuardTTL = 7 * 24 * time.Hour

// Guard is the downstream half of fencing: a service that performs side
// effects (deploy, payment, email) asks it whether the token a request
// carries may act, and so refuses a worker that was paused, lost its lease
// and resumed after another worker took the node over.
//
// What it promises: per resource (a node of one run incarnation,
// "run~incarnation/node"), Admit is one atomic
// script (scripts/lua/guard.lua) over one hash holding the newest epoch
// admitted and its claim id. Once epoch E has been admitted, no token with
// an epoch below E is admitted again (ErrStaleEpoch), and at epoch E only the
// claim id first admitted under it is (ErrNotOwner for another: baton's
// Redis issued E twice after a failover, and the first to reach this
// service keeps it). The same token is admitted again and again, so the
// owner can retry.
//
// What it cannot promise:
//   - It does not order the side effect itself. Admit then act is a check
//     then an act: a token admitted a moment ago can be superseded while the
//     service is still acting on it. Admit immediately before acting, never
//     once per batch; for full safety, write the token's epoch in the same
//     transaction as the effect (a conditional update on "epoch <= mine")
//     or pass an idempotency key the effect's provider enforces.
//   - Its memory is the guard's Redis. A failover of that Redis can lose
//     the newest record (replication is asynchronous), and after it an older
//     token is admitted again; so is any token once its record's TTL ran out.
//   - Tokens are not authenticated. Anyone who can reach the service can
//     present a high epoch and lock the real owner out; authenticate callers
//     separately.
//
// A Guard is safe for concurrent use and may share baton's Redis or use the
// service's own; every call touches a single key, so Redis Cluster works.
type Guard struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    int64 // ms; 0: never expires
}

var guardScript = redis.NewScript(mustScript("guard"))

func mustScript(name string) string {
	src, err := lua.Source(name)
	if err != nil {
		panic("fence: " + err.Error()) // a build defect, not input
	}
	return src
}

// NewGuard returns a Guard that keeps its records in rdb.
func NewGuard(rdb redis.UniversalClient, opt *GuardOptions) *Guard {
	if opt == nil {
		opt = &GuardOptions{}
	}
	ttl := cmp.Or(opt.TTL, DefaultGuardTTL)
	g := &Guard{rdb: rdb, prefix: cmp.Or(opt.Prefix, "baton:guard")}
	if ttl > 0 {
		g.ttl = max(ms(ttl), 1)
	}
	return g
}

// Admit admits tok or refuses it, atomically with every other Admit for the
// same resource. An admitted newer epoch becomes the resource's record and
// every admit refreshes its TTL. Errors: ErrStaleEpoch (an older epoch),
// ErrNotOwner (the recorded epoch with another claim id), ErrInvalidID (an
// id that cannot be part of a key, or an epoch below 1), else Redis's
// error, wrapped: then the service must not act.
func (g *Guard) Admit(ctx context.Context, tok Token) (err error) {
	defer func() { recordAdmit(ctx, tok, err) }()
	if err := checkToken(tok); err != nil {
		return err
	}
	key := g.prefix + ":" + tok.Run + ":" + tok.Node
	if tok.Incarnation != "" {
		key = g.prefix + ":" + tok.Run + "~" + tok.Incarnation + ":" + tok.Node
	}
	v, err := guardScript.Run(ctx, g.rdb, []string{key},
		strconv.FormatInt(tok.Epoch, 10), tok.ClaimID, g.ttl).Result()
	if err != nil {
		return fmt.Errorf("guard %s: %w", tok, err)
	}
	_, r, err := reply(v)
	if err != nil {
		if len(r) > 0 {
			return fmt.Errorf("guard %s: seen epoch %d: %w", tok, asInt(r[0]), err)
		}
		return fmt.Errorf("guard %s: %w", tok, err)
	}
	return nil
}

// checkToken validates what Admit builds a key from or stores. ParseToken
// already checks the run and node ids; a Token built in Go may not be.
func checkToken(tok Token) error {
	if err := ValidateID("guard: token run", tok.Run); err != nil {
		return err
	}
	if err := ValidateID("guard: token node", tok.Node); err != nil {
		return err
	}
	if tok.Incarnation != "" {
		if err := ValidateID("guard: token incarnation", tok.Incarnation); err != nil {
			return err
		}
	}
	if err := ValidateID("guard: token claim id", tok.ClaimID); err != nil {
		return err
	}
	if tok.Epoch < 1 {
		return fmt.Errorf("guard: token epoch: %w: %d, claims start at 1", ErrInvalidID, tok.Epoch)
	}
	return nil
}

// MemoryGuard is a Guard kept in the process's memory, for tests and for a
// single-process service that needs no Redis. It decides exactly as Guard
// does, but its records never expire (one small entry per resource seen)
// and die with the process: after a restart every epoch is new again.
type MemoryGuard struct {
	mu   sync.Mutex
	seen map[string]Token // by Resource()
}

// NewMemoryGuard returns an empty MemoryGuard.
func NewMemoryGuard() *MemoryGuard { return &MemoryGuard{seen: map[string]Token{}} }

// Admit is Guard.Admit. A done ctx admits nothing.
func (g *MemoryGuard) Admit(ctx context.Context, tok Token) (err error) {
	defer func() { recordAdmit(ctx, tok, err) }()
	if err := checkToken(tok); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("guard %s: %w", tok, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	rec, ok := g.seen[tok.Resource()]
	switch {
	case !ok || tok.Epoch > rec.Epoch:
		g.seen[tok.Resource()] = tok
	case tok.Epoch < rec.Epoch:
		return fmt.Errorf("guard %s: seen epoch %d: %w", tok, rec.Epoch, ErrStaleEpoch)
	case tok.ClaimID != rec.ClaimID:
		return fmt.Errorf("guard %s: seen epoch %d: %w", tok, rec.Epoch, ErrNotOwner)
	}
	return nil
}
