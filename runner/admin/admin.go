package admin

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/runner"
)

// DefaultMaxBodyBytes caps a request body when Config.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 8 << 20

// MonitorPath is where the Asynq web UI is mounted.
const MonitorPath = "/monitor"

// Config configures the admin handler.
type Config struct {
	// Client submits, reads and cancels runs. Required.
	Client *runner.Client
	// Redis is probed by /readyz and read by the Asynq UI. Required; the
	// handler never closes it.
	Redis redis.UniversalClient
	// Gatherer is exposed on /metrics. Zero value:
	// prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// /v1/, /monitor/ and the run and fleet views (a browser logs in once at
	// /login, which sets an HttpOnly session cookie; see SessionTTL). Zero
	// value: no token; those routes then answer loopback hosts only.
	Token string
	// SessionTTL is how long a browser login lasts. The session cookie
	// holds an expiring value signed with a key derived from Token, never
	// Token itself: every runner sharing the token accepts it, and
	// rotating the token ends every session. Zero value: 12h.
	SessionTTL time.Duration
	// TrustForwardedProto marks the session cookie Secure when a request
	// carries "X-Forwarded-Proto: https" (a TLS-terminating proxy in
	// front). Set it only behind such a proxy: a client could send the
	// header itself. Zero value: Secure only when this server terminates
	// TLS.
	TrustForwardedProto bool
	// Logger receives the handler's logs. Zero value: slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; a larger one is refused with 413.
	// Zero value: DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// ReadyTimeout bounds /readyz's PING. Zero value: 2s.
	ReadyTimeout time.Duration
	// MonitorReadOnly restricts the Asynq UI to GET requests (no deleting,
	// archiving or re-running tasks from the UI). Zero value: read-write.
	MonitorReadOnly bool
	// TraceURL, when set, makes the run view link to the run's trace: an
	// http(s) URL of a tracing UI in which {trace_id} stands for the run's
	// trace id (TRACE_URL, e.g. https://jaeger.example/trace/{trace_id}).
	// Zero value: no link.
	TraceURL string

	// The timeouts below apply to the *http.Server that NewServer returns;
	// New ignores them. They bound what a slow or stalled client costs: a
	// connection is held for at most ReadHeaderTimeout before the request
	// is even read, and unauthenticated requests get no longer than
	// authenticated ones.

	// ReadHeaderTimeout bounds reading a request's line and headers. Zero
	// value: 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included: a client
	// that announces a body and sends it slowly, or never, loses its
	// connection after this long. A body of MaxBodyBytes must therefore
	// arrive within it (8 MiB in 30s: about 2.3 Mbit/s). Zero value: 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of its response; every answer but a live event stream fits in it
	// (the Asynq UI polls its JSON API), and a stream extends its deadline
	// at each write. Zero value: 60s.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request. Zero value: 120s.
	IdleTimeout time.Duration
}

// Defaults of the server timeouts in Config.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
)

// NewServer returns an *http.Server that serves New(cfg) with cfg's
// timeouts and logs its connection errors through cfg.Logger. Callers set
// nothing but what to listen on: srv.Serve(ln).
func NewServer(cfg Config) (*http.Server, error) {
	h, err := New(cfg)
	if err != nil {
		return nil, err
	}
	log := cmp.Or(cfg.Logger, slog.Default()).With("component", "admin")
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       cmp.Or(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      cmp.Or(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}, nil
}

// New returns the admin handler. Mount it at the server's root: its routes
// are absolute.
func New(cfg Config) (http.Handler, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("Client is required"))
	}
	if cfg.Redis == nil {
		errs = append(errs, errors.New("Redis is required"))
	}
	if cfg.MaxBodyBytes < 0 {
		errs = append(errs, errors.New("MaxBodyBytes is negative"))
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"ReadHeaderTimeout", cfg.ReadHeaderTimeout}, {"ReadTimeout", cfg.ReadTimeout},
		{"WriteTimeout", cfg.WriteTimeout}, {"IdleTimeout", cfg.IdleTimeout}} {
		if t.d < 0 {
			errs = append(errs, errors.New(t.name+" is negative"))
		}
	}
	if err := CheckTraceURL(cfg.TraceURL); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(errors.New("admin: config"), err)
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.ReadyTimeout = cmp.Or(cfg.ReadyTimeout, 2*time.Second)
	log := cfg.Logger.With("component", "admin")

	a := &api{client: cfg.Client, maxBody: cfg.MaxBodyBytes, log: log}
	contract, err := NewOpenAPIValidator()
	if err != nil {
		return nil, err
	}
	mon := asynqmon.New(asynqmon.Options{
		RootPath:     MonitorPath,
		RedisConnOpt: sharedRedis{cfg.Redis},
		ReadOnly:     cfg.MonitorReadOnly,
	}) // never closed: its Close would close the shared client

	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, DefaultSessionTTL)
	guard := guard{token: cfg.Token, log: log, sessions: newSessions(cfg.Token, cfg.SessionTTL)}
	views, err := newUI(cfg.Client, cfg.Redis, log, cfg.Token != "")
	if err != nil {
		return nil, err
	}
	views.traceURL = cfg.TraceURL
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))
	protect := func(h http.Handler) http.Handler { return guard.wrap(csrf.Handler(h)) }

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.Handle("GET /readyz", readyz{rdb: cfg.Redis, timeout: cfg.ReadyTimeout, log: log})
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.Handle(MonitorPath+"/", protect(withMonitorBar(mon))) // asynqmon caps the bodies it reads at 1 MB
	if cfg.Token != "" {
		lg := login{guard: guard, ui: views, forwarded: cfg.TrustForwardedProto}
		mux.Handle("/login", csrf.Handler(lg))
		mux.Handle("POST /logout", csrf.Handler(http.HandlerFunc(lg.logout)))
	}
	views.routes(mux, protect) // ui.go: /, /runs, /runs/{id}, /workers, /schedules
	mux.HandleFunc("GET "+OpenAPIPath, serveOpenAPI)
	mux.HandleFunc("GET "+SchemaPath, serveSchema)
	mux.Handle("/v1/", protect(a.validateRequests(contract, a.routes())))
	return mux, nil
}

// sharedRedis hands asynqmon the caller's client instead of a new pool:
// asynq.RedisConnOpt is only "something that makes a client".
type sharedRedis struct{ c redis.UniversalClient }

func (s sharedRedis) MakeRedisClient() any { return s.c }

type readyz struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	log     *slog.Logger
}

func (h readyz) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	if err := h.rdb.Ping(ctx).Err(); err != nil {
		h.log.Warn("not_ready", "err", err)
		writeError(w, http.StatusServiceUnavailable, "redis: "+err.Error())
		return
	}
	writeText(w, http.StatusOK, "ok\n")
}

// guard admits a request to the API or the UI: with a token, by bearer
// token; without one, only when addressed to a loopback host.
type guard struct {
	token    string
	log      *slog.Logger
	sessions sessions
}

func (g guard) wrap(next http.Handler) http.Handler {
	var want [sha256.Size]byte
	if g.token != "" {
		want = sha256.Sum256([]byte(g.token))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.token == "" {
			if !IsLoopback(r.Host) {
				g.log.Warn("host_refused", "host", r.Host, "remote_addr", r.RemoteAddr)
				writeError(w, http.StatusForbidden, "host "+r.Host+" refused: without API_TOKEN only loopback hosts are served")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		// Hashing first makes the comparison constant-time in the token's
		// length too.
		sum := sha256.Sum256([]byte(got))
		authorized := ok && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
		if !ok { // a browser on the UI sends the session cookie /login set
			if c, err := r.Cookie(sessionCookie); err == nil && g.sessions.valid(c.Value) {
				authorized = true
			}
		}
		if !authorized {
			g.log.Warn("unauthorized", "method", r.Method, "path", r.URL.Path, "remote_addr", r.RemoteAddr)
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

// IsLoopback reports whether host (a Host header or a listen address, with
// or without a port) names this machine only: localhost, *.localhost,
// 127.0.0.0/8 or ::1. An empty host (all interfaces) is not loopback.
func IsLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// login lets a person open the UI when a token is required: GET shows a
// form, POST checks the token and sets an HttpOnly, SameSite=Strict
// session cookie (session.go), then sends the browser where it was going.
// A wrong token shows the form again, with a message.
type login struct {
	guard     guard
	ui        *ui
	forwarded bool // trust X-Forwarded-Proto for Secure
}

type loginData struct {
	Next, Error string
}

func (l login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		l.ui.render(w, r, http.StatusOK, "login", "page", page{Title: "Log in", Bare: true, Data: loginData{Next: localPath(r.URL.Query().Get("next"))}})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		tok := r.PostFormValue("token")
		next := localPath(r.PostFormValue("next"))
		sum, want := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(l.guard.token))
		if tok == "" || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			l.guard.log.Warn("login_refused", "remote_addr", r.RemoteAddr)
			msg := "That token is not this server's API token."
			if tok == "" {
				msg = "Enter the API token (API_TOKEN) to log in."
			}
			l.ui.render(w, r, http.StatusUnauthorized, "login", "page", page{Title: "Log in", Bare: true, Data: loginData{Next: next, Error: msg}})
			return
		}
		val, exp := l.guard.sessions.issue()
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: val, Path: "/", HttpOnly: true,
			Secure: l.secure(r), SameSite: http.SameSiteStrictMode, Expires: exp, MaxAge: int(time.Until(exp).Seconds())})
		l.guard.log.Info("login", "remote_addr", r.RemoteAddr)
		http.Redirect(w, r, cmp.Or(next, "/runs"), http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// logout clears the session cookie. The value itself stays valid until it
// expires (sessions are stateless); rotate the token to end them all.
func (l login) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		Secure: l.secure(r), SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (l login) secure(r *http.Request) bool {
	return r.TLS != nil || (l.forwarded && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// localPath keeps next only if it is a path on this server ("/runs/x"),
// so that the login cannot be used to send a browser elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		strings.ContainsAny(next, "\r\n") {
		return ""
	}
	return next
}

// CheckTraceURL checks a Config.TraceURL: empty, or an http(s) URL with
// {trace_id} in it.
func CheckTraceURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(s, "{trace_id}", "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("TraceURL %q: want an http:// or https:// URL", s)
	}
	if !strings.Contains(s, "{trace_id}") {
		return fmt.Errorf("TraceURL %q: has no {trace_id} to put the run's trace id in", s)
	}
	return nil
}
