package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// guard admits a request to the API or the UI. With a token: by bearer
// token or session cookie, wrong ones throttled per client (throttle.go).
// Without one: only a caller on this machine, which the connection's peer
// address decides, never a header alone (see loopbackCaller).
type guard struct {
	token    string
	want     [sha256.Size]byte // sha256 of token
	log      *slog.Logger
	sessions sessions
	proxies  proxies
	throttle *throttle
}

func newGuard(token string, log *slog.Logger, s sessions, p proxies, th *throttle) guard {
	g := guard{token: token, log: log, sessions: s, proxies: p, throttle: th}
	if token != "" {
		g.want = sha256.Sum256([]byte(token))
	}
	return g
}

// credential names how a request was admitted, for audit lines: "token",
// "session:<id>" (the random id of one login, never its signature), or
// "loopback". Empty: not admitted.
func (g guard) credential(r *http.Request) string {
	if g.token == "" {
		if loopbackCaller(r) {
			return "loopback"
		}
		return ""
	}
	if got, ok := bearer(r.Header.Get("Authorization")); ok {
		// Hashing first makes the comparison constant-time in the
		// token's length too.
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], g.want[:]) == 1 {
			return "token"
		}
		return ""
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if id, ok := g.sessions.check(c.Value); ok {
			return "session:" + id
		}
	}
	return ""
}

func (g guard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.token == "" {
			if !loopbackCaller(r) {
				client := g.proxies.client(r)
				g.throttle.refused(client, func(n int) { // logged at a rate, as wrong tokens are
					g.log.Warn("caller_refused", "client", client, "host", r.Host, "refused", n, "last_path", r.URL.Path)
				})
				writeError(w, http.StatusForbidden, "refused: without API_TOKEN only callers on this machine "+
					"(a loopback peer addressing a loopback host, not through a proxy) are served")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		client := g.proxies.client(r)
		if wait, ok := g.throttle.allowed(client); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			writeError(w, http.StatusTooManyRequests, "too many wrong tokens from "+client+"; retry in "+strconv.Itoa(wait)+"s")
			return
		}
		if g.credential(r) == "" {
			g.throttle.refused(client, func(n int) {
				g.log.Warn("unauthorized", "client", client, "refused", n, "last_path", r.URL.Path)
			})
			if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" &&
				strings.Contains(r.Header.Get("Accept"), "text/html") && !strings.HasPrefix(r.URL.Path, "/v1/") {
				// A person in a browser: log in, then come back here.
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// forwardedHeaders mark a request that a proxy relayed: its peer is the
// proxy, not the caller.
var forwardedHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip", "Via"}

// loopbackCaller reports whether r comes from this machine: its peer
// address (the connection's, which a client cannot choose) is loopback or
// a Unix socket, its Host names a loopback host (a DNS-rebinding page
// sends its own name), and it carries no proxy's forwarding header (a
// proxy on this machine relays callers from anywhere). The Host alone is
// not enough: a remote client can send "Host: localhost".
func loopbackCaller(r *http.Request) bool {
	if !IsLoopback(r.Host) || !loopbackPeer(r.RemoteAddr) {
		return false
	}
	for _, h := range forwardedHeaders {
		if r.Header.Get(h) != "" {
			return false
		}
	}
	return true
}

// loopbackPeer reports whether a connection's remote address is on this
// machine: a loopback IP, or a Unix socket (whose address is empty or
// "@").
func loopbackPeer(remote string) bool {
	if remote == "" || remote == "@" {
		return true
	}
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

// IsLoopback reports whether host (a Host header or a listen address, with
// or without a port) names this machine only: localhost, *.localhost,
// 127.0.0.0/8 or ::1. An empty host (all interfaces) is not loopback. A
// listener must not resolve a *.localhost name through DNS, which may
// answer anything: see ListenHost.
func IsLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if isLocalhostName(host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func isLocalhostName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// ListenHost returns the host a listener should bind for host: localhost
// and *.localhost become 127.0.0.1 (RFC 6761: they are loopback, and a
// resolver, DNS above all, must not be asked), anything else is returned
// as it is.
func ListenHost(host string) string {
	if isLocalhostName(host) {
		return "127.0.0.1"
	}
	return host
}
