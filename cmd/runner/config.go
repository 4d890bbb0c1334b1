package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/runner/admin"
)

// Config is the runner's environment. Every default works on a laptop with
// a Redis on 127.0.0.1:6379.
type Config struct {
	// Redis is the Redis of the queue and of every run's state: one server
	// (REDIS_URL, default redis://127.0.0.1:6379/0), a cluster
	// (REDIS_CLUSTER_ADDRS) or Sentinel (REDIS_SENTINEL_ADDRS and
	// REDIS_SENTINEL_MASTER); see redisconn.Config. Ignored with
	// --embedded.
	Redis redisconn.Config
	// RunnerID names this worker in leases, events and logs
	// ([A-Za-z0-9._-], at most 128 bytes). Default: empty, meaning
	// host-pid-random.
	RunnerID string `env:"RUNNER_ID"`
	// Concurrency is how many nodes run at once. Default: 10.
	Concurrency int `env:"CONCURRENCY" envDefault:"10"`
	// Dispatchers is how many Asynq servers (dequeue loops) the runner
	// runs, CONCURRENCY divided among them (1 to 16). Default: unset or 0,
	// meaning 3 (runner.DefaultDispatchers).
	Dispatchers int `env:"DISPATCHERS"`
	// PollInterval is how long an idle dequeue loop waits before it asks
	// Redis again (1ms to 10s). It sets submit-to-start latency when idle
	// (about half of it at the median) and the idle load on Redis: each
	// loop polls about once per interval. Default: unset or 0, meaning
	// runner.DefaultPollInterval (10ms).
	PollInterval time.Duration `env:"POLL_INTERVAL"`
	// Queues are the Asynq queues served, with their weights:
	// "critical=6,default=3,low=1". Default: "default=1".
	Queues string `env:"QUEUES" envDefault:"default=1"`
	// LeaseTTL is how long a claim or a renewal is trusted; a dead worker's
	// node is taken over about LEASE_TTL + GRACE + SWEEP_INTERVAL after its
	// last heartbeat. Default: 30s.
	LeaseTTL time.Duration `env:"LEASE_TTL" envDefault:"30s"`
	// HeartbeatInterval is the lease renewal period; LEASE_TTL must be at
	// least 3 × HEARTBEAT_INTERVAL. Default: unset or 0, meaning
	// LEASE_TTL/3.
	HeartbeatInterval time.Duration `env:"HEARTBEAT_INTERVAL"`
	// Grace is how long after a lease's end a takeover waits, to absorb
	// clock and network jitter. Default: 1s.
	Grace time.Duration `env:"GRACE" envDefault:"1s"`
	// SweepInterval is how often expired leases and forgotten READY nodes
	// are looked for. Default: 1s.
	SweepInterval time.Duration `env:"SWEEP_INTERVAL" envDefault:"1s"`
	// ShutdownTimeout is how long SIGTERM waits for running nodes to reach
	// a safe point before their leases are released. Default: 10s.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"10s"`
	// AdminAddr is where the admin HTTP server listens (probes, metrics,
	// the Asynq UI, the run API). A host that is not loopback requires
	// API_TOKEN; localhost and *.localhost bind 127.0.0.1, never looked
	// up. Default: 127.0.0.1:8080, or the next free port of the 20
	// after it when that one is taken (several runners on one host); set
	// but empty: no admin server. A port set here that is taken fails the
	// start.
	AdminAddr string `env:"ADMIN_ADDR" envDefault:"127.0.0.1:8080"`
	// adminAddrDefault: ADMIN_ADDR was not set, so a taken default port
	// moves on to the next free one (listen.go).
	adminAddrDefault bool
	// WebhookSecret keys the HMAC-SHA256 signature (Baton-Signature) of
	// run-completion webhooks ("notify" in a run spec); every runner must
	// share it. Default: empty, webhooks are sent unsigned (with a
	// warning at start).
	WebhookSecret string `env:"WEBHOOK_SECRET"`
	// APIToken, when set, is required as "Authorization: Bearer <token>"
	// by the run API and the UI: at least 16 characters and random enough
	// by admin.TokenBits (generate one: openssl rand -hex 32). Default:
	// empty; the admin server then serves only callers on this machine
	// (a loopback peer addressing a loopback host, not through a proxy).
	APIToken string `env:"API_TOKEN"`
	// TrustedProxy lists the addresses (IPs or CIDR prefixes, comma
	// separated) of a TLS-terminating reverse proxy in front of the admin
	// server. From these peers only, "X-Forwarded-Proto: https" makes the
	// session cookie Secure and X-Forwarded-For names the client for the
	// per-client limits. Requires API_TOKEN. Default: empty.
	TrustedProxy string `env:"TRUSTED_PROXY"`
	// MonitorReadOnly makes the Asynq UI (/monitor/) read-only: anything
	// but GET and HEAD is refused with 405. Default: false; every change
	// made through it is logged (monitor_action) with who made it.
	MonitorReadOnly bool `env:"MONITOR_READ_ONLY" envDefault:"false"`
	// EventStreamsPerClient bounds the live event streams
	// (/v1/runs/{id}/events?follow=1) one client address holds at once, of
	// the admin server's 16. Default: 8.
	EventStreamsPerClient int `env:"EVENT_STREAMS_PER_CLIENT" envDefault:"8"`
	// EventStreamMaxAge is how long one live event stream is served
	// before it is closed; clients resume with Last-Event-ID. Default: 10m.
	EventStreamMaxAge time.Duration `env:"EVENT_STREAM_MAX_AGE" envDefault:"10m"`
	// LogLevel is debug, info, warn or error. Default: info.
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`
	// LogFormat is text or json. Default: text.
	LogFormat string `env:"LOG_FORMAT" envDefault:"text"`
	// MaxInputBytes caps each node's input in runs submitted through the
	// API. Default: 1048576 (1 MiB).
	MaxInputBytes int `env:"MAX_INPUT_BYTES" envDefault:"1048576"`
	// MaxSpecBytes caps a whole run spec submitted through the API (its
	// body), as enqueue and the Go client cap theirs; at least
	// MAX_INPUT_BYTES. Default: 8388608 (8 MiB).
	MaxSpecBytes int `env:"MAX_SPEC_BYTES" envDefault:"8388608"`
	// Prefix starts every baton key; workers and clients of one deployment
	// must agree on it. Default: baton.
	Prefix string `env:"BATON_PREFIX" envDefault:"baton"`
	// Retention is how long a finished run stays readable before Redis
	// frees it; a negative value keeps runs forever. Default: 168h.
	Retention time.Duration `env:"RUN_RETENTION" envDefault:"168h"`
	// ThreadRetention is how long a thread's checkpoints live after their
	// last write, and at least while a node of the thread waits
	// (docs/waiting.md); a negative value keeps them forever. At least
	// 1m. Default: 720h (30 days).
	ThreadRetention time.Duration `env:"THREAD_RETENTION" envDefault:"720h"`
	// CheckpointHistory is how many checkpoints a thread keeps per
	// namespace, the newest (and a rollback's anchor). 1 to 10000.
	// Default: 100.
	CheckpointHistory int `env:"CHECKPOINT_HISTORY" envDefault:"100"`
	// MaxCheckpointBytes caps a checkpoint's data and metadata together,
	// a task's pending writes, a wait's request and a resume's value.
	// 1 KiB to 64 MiB. Default: 1048576 (1 MiB).
	MaxCheckpointBytes int `env:"MAX_CHECKPOINT_BYTES" envDefault:"1048576"`
	// ReadyThreshold is how long a READY node may stay unclaimed (its
	// delivery lost) before the sweeper enqueues it again. Default: 15s.
	ReadyThreshold time.Duration `env:"READY_THRESHOLD" envDefault:"15s"`
	// HistoryFile, when set, is a file the runner appends one JSON line to
	// per protocol call (claim, heartbeat, commit, fail, release, expire)
	// with its invocation and response times: the history that cmd/chaos
	// checks. Default: empty, no history.
	HistoryFile string `env:"HISTORY_FILE"`
	// ClaimReplicas, when above zero, makes each claim and commit wait
	// (Redis WAIT, up to 1s, retried) until that many replicas hold it
	// before the node runs or its outcome counts. Default: 0.
	ClaimReplicas int `env:"CLAIM_REPLICAS" envDefault:"0"`
	// TakeFromQueue lets a commit with no chain to continue claim the
	// queue's next node of its shard for the same handler, in the same
	// script, removing that node's waiting task (single server only; see
	// docs/performance.md). false: every node comes through a delivery of
	// its own. Default: true.
	TakeFromQueue bool `env:"TAKE_FROM_QUEUE" envDefault:"true"`
	// LimitsFile, when set, is a JSON file of fleet-wide limits the
	// runner sets at start ({"limits": [{"name": "openai", "rate":
	// "20/s"}]}, see docs/flow-control.md), replacing those of the same
	// names; a bad file stops the start and sets none. Default: empty.
	LimitsFile string `env:"LIMITS_FILE"`
	// LangGraphConfig, when set, is a LangGraph project's langgraph.json:
	// its graphs run as the node kind "graph" in a warm worker process
	// (docs/graph-workers.md); a bad file or a graph that fails to import
	// stops the start. Default: empty, no graphs.
	LangGraphConfig string `env:"LANGGRAPH_CONFIG"`
	// AgentAPIAddr is where the Agent Server API (LangGraph's SDKs'
	// API, docs/agent-server.md) listens when LANGGRAPH_CONFIG is set; the
	// same rule as ADMIN_ADDR: a host that is not loopback requires
	// API_TOKEN. Default: 127.0.0.1:2024, the port `langgraph dev` uses,
	// or a free port when that one is taken (logged as agent_api_listening);
	// set but empty: no Agent Server API. A port set here that is taken
	// fails the start.
	AgentAPIAddr string `env:"AGENT_API_ADDR" envDefault:"127.0.0.1:2024"`
	// agentAPIAddrDefault: AGENT_API_ADDR was not set (listen.go).
	agentAPIAddrDefault bool
	// LangGraphPython is the interpreter of the project's Python graphs:
	// its virtualenv's, with baton-langgraph installed. Default: python3.
	LangGraphPython string `env:"LANGGRAPH_PYTHON" envDefault:"python3"`
	// LangGraphNode is the node binary of the project's JS graphs.
	// Default: node.
	LangGraphNode string `env:"LANGGRAPH_NODE" envDefault:"node"`
	// LangGraphJSWorker is the JS graph worker's script. Default: empty,
	// meaning the project's node_modules/@baton/langgraph-saver/src/worker.js.
	LangGraphJSWorker string `env:"LANGGRAPH_JS_WORKER"`
	// LangGraphMaxAttempts is how many graph attempts the worker process
	// runs at once. Default: unset or 0, meaning CONCURRENCY.
	LangGraphMaxAttempts int `env:"LANGGRAPH_MAX_ATTEMPTS"`
	// TraceURL, when set, makes the run view link to each traced run's
	// trace: a tracing UI's URL with {trace_id} in it
	// (https://jaeger.example/trace/{trace_id}). Default: empty, no link.
	TraceURL string `env:"TRACE_URL"`
	// ScheduleInterval is how often the runner looks for due cron
	// schedules and fires them: a tick fires at most this long after it
	// is due. Every runner fires schedules, with no leader; a negative
	// value makes this one fire none. Default: 1s.
	ScheduleInterval time.Duration `env:"SCHEDULE_INTERVAL" envDefault:"1s"`
	// ScheduleLate is how old a due tick may be and still fire; an older
	// one was missed while no runner was up, and the schedule's --missed
	// policy (skip, latest) decides. At least 2 × SCHEDULE_INTERVAL.
	// Default: 1m.
	ScheduleLate time.Duration `env:"SCHEDULE_LATE" envDefault:"1m"`

	// What jobs may do (jobs.go, docs/security.md).
	Jobs JobsConfig

	// Embedded is the --embedded flag: Redis is an in-process miniredis.
	Embedded bool `env:"-"`
}

// Bounds that keep a typo from becoming an outage.
const (
	minLeaseTTL      = 100 * time.Millisecond
	maxConcurrency   = 10000
	maxDispatchers   = 16
	minPollInterval  = time.Millisecond
	maxPollInterval  = 10 * time.Second
	maxQueuePriority = 1000
	maxInputLimit    = 64 << 20
	maxSpecLimit     = 2 * maxInputLimit
	minTokenLen      = 16
	maxPrefixLen     = 64
)

// loadConfig reads the configuration from environ and validates it. The
// error lists every problem, one per line.
func loadConfig(environ map[string]string, embedded bool) (Config, error) {
	var c Config
	err := env.ParseWithOptions(&c, env.Options{Environment: environ})
	var errs []error
	failed := map[string]bool{} // variables that did not parse
	if err != nil {
		keys := envKeys()
		var agg env.AggregateError
		if !errors.As(err, &agg) {
			agg.Errors = []error{err}
		}
		for _, e := range agg.Errors {
			var pe env.ParseError
			if errors.As(e, &pe) {
				key := cmp.Or(keys[pe.Name], pe.Name)
				failed[key] = true
				errs = append(errs, fmt.Errorf("%s %q: %v", key, environ[key], unwrapAll(pe.Err)))
				continue
			}
			errs = append(errs, e)
		}
	}
	// env treats a set but empty variable as unset; ADMIN_ADDR= disables.
	v, ok := environ["ADMIN_ADDR"]
	if ok && strings.TrimSpace(v) == "" {
		c.AdminAddr = ""
	}
	c.adminAddrDefault = !ok
	v, ok = environ["AGENT_API_ADDR"]
	if ok && strings.TrimSpace(v) == "" {
		c.AgentAPIAddr = ""
	}
	c.agentAPIAddrDefault = !ok
	c.Embedded = embedded
	if err := c.validate(failed); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// validate returns every problem at once. skip names variables already
// reported as unparsable.
func (c Config) validate(skip map[string]bool) error {
	var errs []error
	bad := func(key, format string, a ...any) {
		if !skip[key] {
			errs = append(errs, fmt.Errorf(key+" "+format, a...))
		}
	}
	if !c.Embedded {
		if err := c.Redis.Validate(); err != nil {
			for _, e := range unjoin(err) {
				if key, _, _ := strings.Cut(e.Error(), " "); !skip[strings.TrimRight(key, ":")] {
					errs = append(errs, e)
				}
			}
		}
	}
	if c.RunnerID != "" {
		if err := fence.ValidateID("RUNNER_ID", c.RunnerID); err != nil {
			bad("RUNNER_ID", "%q: %s", c.RunnerID, strings.TrimPrefix(err.Error(), "RUNNER_ID: "+fence.ErrInvalidID.Error()+": "))
		}
	}
	if err := admin.CheckTraceURL(c.TraceURL); err != nil {
		bad("TRACE_URL", "%s", strings.TrimPrefix(err.Error(), "TraceURL "))
	}
	if c.Concurrency < 1 || c.Concurrency > maxConcurrency {
		bad("CONCURRENCY", "%d: want 1 to %d", c.Concurrency, maxConcurrency)
	}
	if c.Dispatchers < 0 || c.Dispatchers > maxDispatchers {
		bad("DISPATCHERS", "%d: want 1 to %d, or 0 for the default", c.Dispatchers, maxDispatchers)
	}
	if c.PollInterval != 0 && (c.PollInterval < minPollInterval || c.PollInterval > maxPollInterval) {
		bad("POLL_INTERVAL", "%s: want %s to %s, or 0 for the default", c.PollInterval, minPollInterval, maxPollInterval)
	}
	if _, err := parseQueues(c.Queues); err != nil {
		bad("QUEUES", "%q: %v", c.Queues, err)
	}
	if c.LeaseTTL < minLeaseTTL {
		bad("LEASE_TTL", "%s: want at least %s", c.LeaseTTL, minLeaseTTL)
	}
	if c.HeartbeatInterval < 0 {
		bad("HEARTBEAT_INTERVAL", "%s: want a positive duration (0: LEASE_TTL/3)", c.HeartbeatInterval)
	} else if hb := c.heartbeat(); c.LeaseTTL < 3*hb && !skip["LEASE_TTL"] && !skip["HEARTBEAT_INTERVAL"] {
		errs = append(errs, fmt.Errorf("LEASE_TTL %s must be at least 3 × HEARTBEAT_INTERVAL %s (%s): "+
			"a lease must survive two missed heartbeats", c.LeaseTTL, hb, 3*hb))
	}
	for _, v := range []struct {
		key string
		d   time.Duration
	}{{"GRACE", c.Grace}, {"SWEEP_INTERVAL", c.SweepInterval}, {"SHUTDOWN_TIMEOUT", c.ShutdownTimeout},
		{"READY_THRESHOLD", c.ReadyThreshold}} {
		if v.d <= 0 {
			bad(v.key, "%s: want a positive duration", v.d)
		}
	}
	switch {
	case c.ScheduleInterval == 0:
		bad("SCHEDULE_INTERVAL", "0: want a positive duration (a negative one: this runner fires no schedules)")
	case c.ScheduleLate <= 0:
		bad("SCHEDULE_LATE", "%s: want a positive duration", c.ScheduleLate)
	case c.ScheduleInterval > 0 && c.ScheduleLate < 2*c.ScheduleInterval:
		bad("SCHEDULE_LATE", "%s: want at least 2 × SCHEDULE_INTERVAL (%s)", c.ScheduleLate, 2*c.ScheduleInterval)
	}
	if c.ClaimReplicas < 0 || c.ClaimReplicas > 16 {
		bad("CLAIM_REPLICAS", "%d: want 0 to 16 replicas", c.ClaimReplicas)
	}
	if c.Retention == 0 {
		bad("RUN_RETENTION", "0: want a duration (a negative one keeps runs forever)")
	}
	if c.ThreadRetention >= 0 && c.ThreadRetention < time.Minute {
		bad("THREAD_RETENTION", "%s: want at least 1m (a negative one keeps checkpoints forever)", c.ThreadRetention)
	}
	if c.CheckpointHistory < 1 || c.CheckpointHistory > 10000 {
		bad("CHECKPOINT_HISTORY", "%d: want 1 to 10000 checkpoints per namespace", c.CheckpointHistory)
	}
	if c.MaxCheckpointBytes < 1<<10 || c.MaxCheckpointBytes > maxInputLimit {
		bad("MAX_CHECKPOINT_BYTES", "%d: want %d to %d", c.MaxCheckpointBytes, 1<<10, maxInputLimit)
	}
	if c.AdminAddr != "" {
		host, port, err := net.SplitHostPort(c.AdminAddr)
		if p, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || (p == 0 && port != "0") {
			bad("ADMIN_ADDR", "%q: want host:port, e.g. 127.0.0.1:8080 (empty: no admin server)", c.AdminAddr)
		} else if c.APIToken == "" && !admin.IsLoopback(host) {
			errs = append(errs, fmt.Errorf("ADMIN_ADDR %s is not a loopback address (127.0.0.0/8, ::1, localhost) "+
				"and API_TOKEN is empty: set API_TOKEN, or listen on 127.0.0.1", c.AdminAddr))
		}
	}
	if c.AgentAPIAddr != "" && c.LangGraphConfig != "" {
		host, port, err := net.SplitHostPort(c.AgentAPIAddr)
		if p, perr := strconv.ParseUint(port, 10, 16); err != nil || perr != nil || (p == 0 && port != "0") {
			bad("AGENT_API_ADDR", "%q: want host:port, e.g. 127.0.0.1:2024 (empty: no Agent Server API)", c.AgentAPIAddr)
		} else if c.APIToken == "" && !admin.IsLoopback(host) {
			errs = append(errs, fmt.Errorf("AGENT_API_ADDR %s is not a loopback address (127.0.0.0/8, ::1, localhost) "+
				"and API_TOKEN is empty: set API_TOKEN, or listen on 127.0.0.1", c.AgentAPIAddr))
		}
	}
	if c.APIToken != "" {
		switch {
		case len(c.APIToken) < minTokenLen:
			bad("API_TOKEN", "is %d characters: want at least %d", len(c.APIToken), minTokenLen)
		case strings.IndexFunc(c.APIToken, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
			bad("API_TOKEN", "holds whitespace or control characters")
		default:
			if err := admin.CheckToken(c.APIToken); err != nil {
				bad("API_TOKEN", "%v", err)
			}
		}
	}
	if _, err := admin.ParseTrustedProxies(c.TrustedProxy); err != nil {
		bad("TRUSTED_PROXY", "%v", err)
	} else if c.TrustedProxy != "" && c.APIToken == "" {
		bad("TRUSTED_PROXY", "is set and API_TOKEN is empty: behind a proxy every caller looks local, so set API_TOKEN")
	}
	if c.EventStreamsPerClient < 1 || c.EventStreamsPerClient > admin.MaxFollowers {
		bad("EVENT_STREAMS_PER_CLIENT", "%d: want 1 to %d", c.EventStreamsPerClient, admin.MaxFollowers)
	}
	if c.EventStreamMaxAge < time.Second {
		bad("EVENT_STREAM_MAX_AGE", "%s: want at least 1s", c.EventStreamMaxAge)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		bad("LOG_LEVEL", "%q: want debug, info, warn or error", c.LogLevel)
	}
	switch strings.ToLower(c.LogFormat) {
	case "text", "json":
	default:
		bad("LOG_FORMAT", "%q: want text or json", c.LogFormat)
	}
	if c.MaxInputBytes < 1 || c.MaxInputBytes > maxInputLimit {
		bad("MAX_INPUT_BYTES", "%d: want 1 to %d", c.MaxInputBytes, maxInputLimit)
	}
	switch {
	case c.MaxSpecBytes < 1 || c.MaxSpecBytes > maxSpecLimit:
		bad("MAX_SPEC_BYTES", "%d: want 1 to %d", c.MaxSpecBytes, maxSpecLimit)
	case c.MaxSpecBytes < c.MaxInputBytes:
		bad("MAX_SPEC_BYTES", "%d is below MAX_INPUT_BYTES %d: a spec holding one largest input would be refused", c.MaxSpecBytes, c.MaxInputBytes)
	}
	errs = append(errs, c.Jobs.problems(skip)...) // jobs.go
	switch {
	case c.Prefix == "":
		bad("BATON_PREFIX", "is empty")
	case len(c.Prefix) > maxPrefixLen:
		bad("BATON_PREFIX", "is %d bytes: at most %d", len(c.Prefix), maxPrefixLen)
	case strings.ContainsAny(c.Prefix, "{} \t\r\n"):
		bad("BATON_PREFIX", "%q: no braces or whitespace", c.Prefix)
	}
	return errors.Join(errs...)
}

// heartbeat is HEARTBEAT_INTERVAL with its default applied.
func (c Config) heartbeat() time.Duration {
	if c.HeartbeatInterval == 0 {
		return c.LeaseTTL / 3
	}
	return c.HeartbeatInterval
}

// parseQueues reads "critical=6,default=3,low=1".
func parseQueues(s string) (map[string]int, error) {
	out := map[string]int{}
	var errs []error
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, weight, ok := strings.Cut(item, "=")
		name = strings.TrimSpace(name)
		if !ok {
			errs = append(errs, fmt.Errorf("%q: want name=weight", item))
			continue
		}
		if err := fence.ValidateID(fmt.Sprintf("queue %q", name), name); err != nil {
			errs = append(errs, err)
			continue
		}
		w, err := strconv.Atoi(strings.TrimSpace(weight))
		if err != nil || w < 1 || w > maxQueuePriority {
			errs = append(errs, fmt.Errorf("queue %s: weight %q, want 1 to %d", name, weight, maxQueuePriority))
			continue
		}
		if _, dup := out[name]; dup {
			errs = append(errs, fmt.Errorf("queue %s listed twice", name))
			continue
		}
		out[name] = w
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("no queue: want e.g. default=1"))
	}
	if len(errs) > 0 {
		return nil, joinInline(errs)
	}
	return out, nil
}

// parseLevel reads debug, info, warn or error.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q", s)
}

// envKeys maps Config's field names to their variables, so that a parse
// error names what the operator wrote.
func envKeys() map[string]string {
	out := map[string]string{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
				walk(f.Type)
			} else if key, _, _ := strings.Cut(f.Tag.Get("env"), ","); key != "" && key != "-" {
				out[f.Name] = key
			}
		}
	}
	walk(reflect.TypeFor[Config]())
	return out
}

// unjoin splits an errors.Join into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// unwrapAll returns the innermost error: env and strconv wrap the message
// that matters several times.
func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func joinInline(errs []error) error {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}
