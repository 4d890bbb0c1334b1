package admin

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"net/netip"
)

// GuardOptions configure Guard.
type GuardOptions struct {
	// Token, when set, is required as "Authorization: Bearer <token>" (or
	// in APIKeyHeader). Empty: only callers on this machine are served.
	Token string
	// APIKeyHeader, when set, names a header that may carry the token
	// instead (LangGraph's SDKs send "X-Api-Key"). Zero value: none.
	APIKeyHeader string
	// TrustedProxies are as in Config: whose forwarded address names the
	// client that wrong tokens are counted against.
	TrustedProxies []netip.Prefix
	// Logger receives refusals, at a rate. Zero value: slog.Default().
	Logger *slog.Logger
}

// Guard returns the admin API's rule as middleware for another listener of
// the runner (the Agent Server API): with a token, a request needs it and
// wrong ones are throttled per client (429 with Retry-After); without one,
// only a caller on this machine is served (see loopbackCaller), whatever
// its headers say. Refusals are answered with JSON bodies.
func Guard(o GuardOptions) func(http.Handler) http.Handler {
	log := cmp.Or(o.Logger, slog.Default())
	g := newGuard(o.Token, log, newSessions(o.Token, DefaultSessionTTL), proxies(o.TrustedProxies),
		newThrottle(DefaultWrongTokenBurst, DefaultWrongTokenEvery))
	if o.Token == "" || o.APIKeyHeader == "" {
		return g.wrap
	}
	want := sha256.Sum256([]byte(o.Token))
	return func(next http.Handler) http.Handler {
		guarded := g.wrap(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if key := r.Header.Get(o.APIKeyHeader); key != "" && r.Header.Get("Authorization") == "" {
				sum := sha256.Sum256([]byte(key))
				if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
					next.ServeHTTP(w, r)
					return
				}
			}
			guarded.ServeHTTP(w, r)
		})
	}
}
