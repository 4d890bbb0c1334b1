package admin

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Defaults of the wrong-token throttle (Config.WrongTokenBurst and
// WrongTokenEvery).
const (
	// DefaultWrongTokenBurst is how many wrong tokens one client may send
	// before it must wait.
	DefaultWrongTokenBurst = 10
	// DefaultWrongTokenEvery is how often a throttled client earns one
	// more try.
	DefaultWrongTokenEvery = 2 * time.Second
	// wrongTokenLogEvery is the longest one client's refusals go unlogged:
	// its first refusal is logged at once, later ones in one line per
	// interval with their count.
	wrongTokenLogEvery = 10 * time.Second
	// throttleMaxClients bounds the clients remembered; past it, those
	// whose budget is full again are forgotten first.
	throttleMaxClients = 10000
)

// throttle counts wrong tokens per client (a token bucket each): a client
// past its burst is answered 429 without its token being looked at, so
// guessing is slow and cheap to refuse, and it logs them at a rate.
type throttle struct {
	burst float64
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	clients map[string]*clientBudget
}

type clientBudget struct {
	tokens   float64 // tries left, refilled at one per every
	at       time.Time
	loggedAt time.Time
	unlogged int // refusals since loggedAt
}

func newThrottle(burst int, every time.Duration) *throttle {
	return &throttle{burst: float64(burst), every: every, now: time.Now, clients: map[string]*clientBudget{}}
}

// refill brings c's budget up to now; mu is held.
func (t *throttle) refill(c *clientBudget, now time.Time) {
	c.tokens = math.Min(t.burst, c.tokens+float64(now.Sub(c.at))/float64(t.every))
	c.at = now
}

// allowed reports whether client may try a token now, and otherwise in
// how many seconds it may.
func (t *throttle) allowed(client string) (int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.clients[client]
	if c == nil {
		return 0, true
	}
	t.refill(c, t.now())
	if c.tokens >= 1 {
		return 0, true
	}
	return int(math.Ceil((1 - c.tokens) * t.every.Seconds())), false
}

// refused counts a wrong token from client and calls log with the number
// of refusals not logged yet when a line is due: at once for a client's
// first, then at most once per wrongTokenLogEvery.
func (t *throttle) refused(client string, log func(n int)) {
	t.mu.Lock()
	now := t.now()
	c := t.clients[client]
	if c == nil {
		if len(t.clients) >= throttleMaxClients {
			t.prune(now)
		}
		c = &clientBudget{tokens: t.burst, at: now}
		t.clients[client] = c
	}
	t.refill(c, now)
	c.tokens = math.Max(0, c.tokens-1)
	c.unlogged++
	n := 0
	if c.loggedAt.IsZero() || now.Sub(c.loggedAt) >= wrongTokenLogEvery {
		n, c.unlogged, c.loggedAt = c.unlogged, 0, now
	}
	t.mu.Unlock()
	if n > 0 {
		log(n)
	}
}

// prune forgets clients whose budget is full again; mu is held.
func (t *throttle) prune(now time.Time) {
	for k, c := range t.clients {
		t.refill(c, now)
		if c.tokens >= t.burst && now.Sub(c.loggedAt) >= wrongTokenLogEvery {
			delete(t.clients, k)
		}
	}
}

// proxies are the peers trusted to say who the client is and whether it
// used TLS (Config.TrustedProxies): a TLS-terminating reverse proxy.
type proxies []netip.Prefix

func (p proxies) trusted(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	return err == nil && p.has(ap.Addr())
}

func (p proxies) has(a netip.Addr) bool {
	for _, pfx := range p {
		if pfx.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// client names the caller of r for per-client limits: its peer's IP, or,
// when the peer is a trusted proxy, the nearest address in
// X-Forwarded-For that is not one.
func (p proxies) client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !p.trusted(r.RemoteAddr) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		ip, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !p.has(ip) {
			return ip.Unmap().String()
		}
	}
	return host
}

// ParseTrustedProxies reads a comma-separated list of IP addresses and
// CIDR prefixes (TRUSTED_PROXY). Every entry that is neither is named in
// the error.
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var bad []string
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if pfx, err := netip.ParsePrefix(item); err == nil {
			out = append(out, pfx.Masked())
		} else if ip, err := netip.ParseAddr(item); err == nil {
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		} else {
			bad = append(bad, fmt.Sprintf("%q", item))
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: want IP addresses or CIDR prefixes, e.g. 10.0.0.5 or 10.0.0.0/24", strings.Join(bad, ", "))
	}
	return out, nil
}
