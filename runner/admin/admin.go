package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/internal/runfeed"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
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
	// value: no token; those routes, and /metrics, then answer only
	// callers on this machine: a loopback peer address and a loopback
	// Host, with no proxy's forwarding header. A proxy in front therefore
	// needs a token.
	Token string
	// SessionTTL is how long a browser login lasts. The session cookie
	// holds an expiring value signed with a key derived from Token, never
	// Token itself: every runner sharing the token accepts it, and
	// rotating the token ends every session. Zero value: 12h.
	SessionTTL time.Duration
	// TrustedProxies are the addresses of a TLS-terminating reverse proxy
	// in front (TRUSTED_PROXY): from these peers only, "X-Forwarded-Proto:
	// https" marks the session cookie Secure, and X-Forwarded-For names
	// the client for the per-client limits (wrong tokens, event streams).
	// Requires Token. Zero value: none; the cookie is Secure only when
	// this server terminates TLS.
	TrustedProxies []netip.Prefix
	// TrustForwardedProto trusts "X-Forwarded-Proto: https" from any peer.
	// Prefer TrustedProxies: a client can send the header itself. Zero
	// value: false.
	TrustForwardedProto bool
	// WrongTokenBurst is how many wrong tokens (bearer, session cookie or
	// login) one client may send before it gets 429 for WrongTokenEvery
	// per further try, its token unread. Zero value:
	// DefaultWrongTokenBurst (10).
	WrongTokenBurst int
	// WrongTokenEvery is how often a throttled client earns one more try.
	// Zero value: DefaultWrongTokenEvery (2s).
	WrongTokenEvery time.Duration
	// FollowersPerClient bounds the live event streams one client (see
	// TrustedProxies) holds at once, of MaxFollowers. Zero value:
	// DefaultFollowersPerClient (8).
	FollowersPerClient int
	// FollowMaxAge is how long one live event stream is served; it then
	// ends without "end", and the client resumes with Last-Event-ID
	// (EventSource does by itself). Zero value: DefaultFollowMaxAge
	// (10m).
	FollowMaxAge time.Duration
	// Logger receives the handler's logs. Zero value: slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; a larger one is refused with 413.
	// Zero value: DefaultMaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// ReadyTimeout bounds /readyz's PING. Zero value: 2s.
	ReadyTimeout time.Duration
	// MonitorReadOnly restricts the Asynq UI to GET and HEAD requests (no
	// deleting, archiving or re-running tasks, no pausing queues from the
	// UI). Zero value: read-write, each change logged ("monitor_action")
	// with who made it.
	MonitorReadOnly bool
	// TraceURL, when set, makes the run view link to the run's trace: an
	// http(s) URL of a tracing UI in which {trace_id} stands for the run's
	// trace id (TRACE_URL, e.g. https://jaeger.example/trace/{trace_id}).
	// Zero value: no link.
	TraceURL string
	// Redact holds values the views show as [redacted] wherever they occur
	// in a node's input, result or error: the runner's own secrets and the
	// values of REDACT_ENV (the stock runner passes the Redactor its exec
	// kind uses). Runners redact what they store already; this also covers
	// what another runner, or a kind that does not redact, stored. Zero
	// value: the views hide only what looks secret by its name or shape.
	Redact *kinds.Redactor

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
	if len(cfg.TrustedProxies) > 0 && cfg.Token == "" {
		errs = append(errs, errors.New("TrustedProxies needs a Token: behind a proxy every caller looks local"))
	}
	if cfg.WrongTokenBurst < 0 || cfg.WrongTokenEvery < 0 || cfg.FollowersPerClient < 0 || cfg.FollowMaxAge < 0 {
		errs = append(errs, errors.New("WrongTokenBurst, WrongTokenEvery, FollowersPerClient and FollowMaxAge must not be negative"))
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

	cfg.SessionTTL = cmp.Or(cfg.SessionTTL, DefaultSessionTTL)
	th := newThrottle(cmp.Or(cfg.WrongTokenBurst, DefaultWrongTokenBurst), cmp.Or(cfg.WrongTokenEvery, DefaultWrongTokenEvery))
	guard := newGuard(cfg.Token, log, newSessions(cfg.Token, cfg.SessionTTL), proxies(cfg.TrustedProxies), th)
	a := &api{client: cfg.Client, maxBody: cfg.MaxBodyBytes, log: log, clientOf: guard.proxies.client,
		followers:    newFollowers(MaxFollowers, cmp.Or(cfg.FollowersPerClient, DefaultFollowersPerClient)),
		streamers:    newFollowers(MaxStreamClients, cmp.Or(cfg.FollowersPerClient, DefaultFollowersPerClient)),
		followMaxAge: cmp.Or(cfg.FollowMaxAge, DefaultFollowMaxAge),
		feeds:        &runfeed.Hub{Store: cfg.Client.Store(), MaxRuns: MaxStreamRuns, Log: log}}
	contract, err := NewOpenAPIValidator()
	if err != nil {
		return nil, err
	}
	mon := asynqmon.New(asynqmon.Options{
		RootPath:     MonitorPath,
		RedisConnOpt: sharedRedis{cfg.Redis},
		ReadOnly:     cfg.MonitorReadOnly,
	}) // never closed: its Close would close the shared client

	views, err := newUI(cfg.Client, cfg.Redis, log, cfg.Token != "")
	if err != nil {
		return nil, err
	}
	views.traceURL = cfg.TraceURL
	views.secrets = cfg.Redact
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))
	protect := func(h http.Handler) http.Handler { return guard.wrap(csrf.Handler(h)) }

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
	mux.Handle("GET /readyz", readyz{rdb: cfg.Redis, timeout: cfg.ReadyTimeout, log: log, guard: guard})
	metrics := promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})
	if cfg.Token == "" {
		// Without a token the runner listens on loopback only, and its
		// metrics (queue names, run counts) are for this machine too: a
		// DNS-rebinding page must not read them.
		metrics = guard.wrap(metrics)
	}
	mux.Handle("GET /metrics", metrics)
	// asynqmon caps the bodies it reads at 1 MB.
	mux.Handle(MonitorPath+"/", protect(monitorGuard(guard, cfg.MonitorReadOnly, withMonitorBar(mon))))
	if cfg.Token != "" {
		lg := login{guard: guard, ui: views, forwardedAny: cfg.TrustForwardedProto}
		mux.Handle("/login", csrf.Handler(lg))
		mux.Handle("POST /logout", csrf.Handler(http.HandlerFunc(lg.logout)))
	}
	views.routes(mux, protect) // ui.go: /, /runs, /runs/{id}, /workers, /schedules
	mux.HandleFunc("GET "+OpenAPIPath, serveOpenAPI)
	mux.HandleFunc("GET "+SchemaPath, serveSchema)
	mux.Handle("/v1/", protect(a.validateRequests(contract, a.routes())))
	return secureHeaders(mux), nil
}

// sharedRedis hands asynqmon the caller's client instead of a new pool:
// asynq.RedisConnOpt is only "something that makes a client".
type sharedRedis struct{ c redis.UniversalClient }

func (s sharedRedis) MakeRedisClient() any { return s.c }

type readyz struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	log     *slog.Logger
	guard   guard
}

// ServeHTTP answers 503 while Redis does not answer PING. The error itself
// (addresses, names a dial failed on) is logged, and shown only to a
// caller the API would admit; a probe needs only the status.
func (h readyz) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	if err := h.rdb.Ping(ctx).Err(); err != nil {
		h.log.Warn("not_ready", "err", err)
		msg := "redis unreachable"
		if h.guard.credential(r) != "" {
			msg = "redis: " + err.Error()
		}
		writeError(w, http.StatusServiceUnavailable, msg)
		return
	}
	writeText(w, http.StatusOK, "ok\n")
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
