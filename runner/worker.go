package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/jobpolicy"
	"github.com/batonrun/baton/spec"
)

// WorkerConfig configures a Worker. Every zero value has a default that
// works on a laptop.
type WorkerConfig struct {
	// Redis is the store and the queue's Redis. Required; not closed by the
	// worker.
	Redis redis.UniversalClient
	// Prefix starts every baton key. Zero value: "baton".
	Prefix string
	// ID names this worker in leases and events. Zero value:
	// "host-pid-random".
	ID string
	// Concurrency is how many nodes run at once. Zero value: 10.
	Concurrency int
	// Dispatchers is how many Asynq servers (dequeue loops) the worker
	// runs; Concurrency is divided among them. One server's dequeue round
	// trip caps its throughput. Zero value: DefaultDispatchers.
	Dispatchers int
	// Queues maps Asynq queue names to priorities. Zero value:
	// {"default": 1}.
	Queues map[string]int
	// LeaseTTL is how long a claim or renewal is trusted. Zero value: 30s.
	LeaseTTL time.Duration
	// HeartbeatInterval is the renewal period. Zero value: LeaseTTL/3.
	// LeaseTTL must be at least 3 × HeartbeatInterval.
	HeartbeatInterval time.Duration
	// Grace is how long after a lease's end a takeover waits. Zero value:
	// 1s.
	Grace time.Duration
	// SweepInterval is how often the sweeper looks for expired leases and
	// unclaimed READY nodes. Zero value: 1s.
	SweepInterval time.Duration
	// ReadyThreshold is how long a READY node may stay unclaimed before the
	// sweeper enqueues it again. Zero value: 15s.
	ReadyThreshold time.Duration
	// ShutdownTimeout bounds how long Shutdown waits for handlers to reach a
	// safe point. Zero value: 10s.
	ShutdownTimeout time.Duration
	// PollInterval is how often an idle Asynq server looks for tasks; it
	// sets idle enqueue-to-start latency. Zero value: DefaultPollInterval.
	PollInterval time.Duration
	// Retention is how long a finished run stays readable (status, events)
	// before Redis frees its keys; negative keeps runs forever. Zero value:
	// 7 days.
	Retention time.Duration
	// RetryBase and RetryMax bound the exponential backoff between a node's
	// failed attempts. Zero values: 1s and 5m.
	RetryBase, RetryMax time.Duration
	// Logger receives the worker's logs. Zero value: slog.Default().
	Logger *slog.Logger
	// Metrics receives the worker's series. Zero value: unregistered ones.
	Metrics *Metrics
	// History, when set, receives one JSON line (fence.Op) per protocol
	// call this worker makes (claim, heartbeat, commit, fail, release,
	// expire), each in one Write: a history for fault checkers such as
	// cmd/chaos. Zero value: none.
	History io.Writer
	// NoTake turns off taking the queue's next node in a commit
	// (fence.Continue.Take): every node of another run then comes through
	// a delivery of its own, claimed by its handler. Taking is on by
	// default, on a single server only.
	NoTake bool
	// ClaimReplicas, when above zero, makes each claim and commit wait for
	// that many replicas to acknowledge it (Redis WAIT) before the node's
	// handler starts or its outcome counts: a claim then survives a
	// failover to one of them. Zero value: no waiting.
	ClaimReplicas int
	// ThreadRetention, CheckpointHistory and MaxCheckpointBytes are
	// fence.Options' (how long a thread's checkpoints live, how many
	// each namespace keeps, how large one may be). Zero values: fence's
	// defaults (30 days, 100, 1 MiB).
	ThreadRetention    time.Duration
	CheckpointHistory  int
	MaxCheckpointBytes int
	// ScheduleInterval is how often the worker's scheduler looks for due
	// cron schedules and fires them (scheduler.go); a tick fires at most
	// this long after it is due. Negative: this worker fires none. Zero
	// value: DefaultScheduleInterval (1s).
	ScheduleInterval time.Duration
	// ScheduleLate is how old a due tick may be and still fire; older ones
	// count as missed (no runner was up) and follow the schedule's missed
	// policy. At least 2 × ScheduleInterval. Zero value:
	// DefaultScheduleLate (1m).
	ScheduleLate time.Duration
	// ScheduleLimits bound the runs the scheduler submits, as the API's
	// client bounds submitted ones. Zero value: spec.Limits' defaults.
	ScheduleLimits spec.Limits
	// Jobs is what this worker's kinds let jobs reach (the stock kinds'
	// kinds.Stock.Rules), published in its advertisement: every submit
	// (the API, enqueue, the Go client, schedules) refuses at once what
	// the live workers that could claim a node would refuse when it runs.
	// Nil: nothing published; this worker's nodes are checked only when
	// they run.
	Jobs *jobpolicy.Rules
}

func (c *WorkerConfig) setDefaults() {
	host, _ := os.Hostname()
	c.ID = cmp.Or(c.ID, fmt.Sprintf("%s-%d-%04x", cmp.Or(host, "worker"), os.Getpid(), rand.IntN(1<<16)))
	c.Concurrency = cmp.Or(c.Concurrency, 10)
	c.Dispatchers = cmp.Or(c.Dispatchers, DefaultDispatchers)
	if len(c.Queues) == 0 {
		c.Queues = map[string]int{DefaultQueue: 1}
	}
	c.LeaseTTL = cmp.Or(c.LeaseTTL, 30*time.Second)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, c.LeaseTTL/3)
	c.Grace = cmp.Or(c.Grace, time.Second)
	c.SweepInterval = cmp.Or(c.SweepInterval, time.Second)
	c.ReadyThreshold = cmp.Or(c.ReadyThreshold, 15*time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 10*time.Second)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.RetryBase = cmp.Or(c.RetryBase, time.Second)
	c.RetryMax = cmp.Or(c.RetryMax, 5*time.Minute)
	c.ScheduleInterval = cmp.Or(c.ScheduleInterval, DefaultScheduleInterval)
	c.ScheduleLate = cmp.Or(c.ScheduleLate, DefaultScheduleLate)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
}

// validate returns every problem at once.
func (c *WorkerConfig) validate() error {
	var errs []error
	if c.Redis == nil {
		errs = append(errs, errors.New("Redis is required"))
	}
	if err := fence.ValidateID("worker id", c.ID); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: want at least 1", c.Concurrency))
	}
	if c.Dispatchers < 1 || c.Dispatchers > maxDispatchers {
		errs = append(errs, fmt.Errorf("dispatchers %d: want 1 to %d", c.Dispatchers, maxDispatchers))
	}
	for q, p := range c.Queues {
		if err := fence.ValidateID("queue", q); err != nil {
			errs = append(errs, err)
		}
		if p < 1 {
			errs = append(errs, fmt.Errorf("queue %s: priority %d, want at least 1", q, p))
		}
	}
	if c.ScheduleInterval > 0 && c.ScheduleLate < 2*c.ScheduleInterval {
		errs = append(errs, fmt.Errorf("schedule late %s must be at least 2 × schedule interval %s", c.ScheduleLate, c.ScheduleInterval))
	}
	if c.LeaseTTL < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("lease ttl %s: want at least 100ms", c.LeaseTTL))
	}
	if c.LeaseTTL < 3*c.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("lease ttl %s must be at least 3 × heartbeat interval %s", c.LeaseTTL, c.HeartbeatInterval))
	}
	for name, d := range map[string]time.Duration{"grace": c.Grace, "sweep interval": c.SweepInterval,
		"ready threshold": c.ReadyThreshold, "shutdown timeout": c.ShutdownTimeout, "poll interval": c.PollInterval,
		"retry base": c.RetryBase, "retry max": c.RetryMax, "heartbeat interval": c.HeartbeatInterval} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: want a positive duration", name, d))
		}
	}
	return errors.Join(errs...)
}

// Worker runs nodes delivered by Asynq under fenced leases. Build it with
// NewWorker, Register kinds, then Start; Shutdown drains it.
//
// Components and shutdown order: the Asynq servers stop fetching; running
// handlers are cancelled with ErrShutdown and given ShutdownTimeout to
// return, and each one's lease is released and its node re-enqueued; then
// the heartbeater, the cancel watcher, the sweeper, the scheduler and the Asynq server
// servers stop.
type Worker struct {
	cfg   WorkerConfig
	store *fence.Store
	queue enqueuer
	kinds map[string]Kind
	log   *slog.Logger
	m     *Metrics
	srv   dispatchers
	hb    *heartbeater
	cw    *cancelWatcher // pushes a run's cancel to hb at once
	sweep *sweeper
	sched *scheduler     // nil: this worker fires no schedules
	cont  fence.Continue // what a commit may claim next for this worker
	pause *pauseWatch    // its queues not paused: where a chain may continue
	acks  *acks          // commits sent with their task's acknowledgement; nil on a cluster

	// tookLast says whether the last commit that tried to take a node
	// from the queue got one, and probedAt when one last tried while
	// tookLast was false (Unix ns): takeFrom (handler.go) reads both.
	tookLast atomic.Bool
	probedAt atomic.Int64

	// active counts running handlers. A delivery that Asynq hands over
	// after Shutdown began (a dispatch loop stopping) is turned away,
	// never counted: Add must not race with Shutdown's Wait.
	activeMu sync.Mutex
	draining bool
	active   sync.WaitGroup

	mu       sync.Mutex
	started  bool
	stopping bool
	cancel   context.CancelCauseFunc // cancels every component and handler
}

// NewWorker checks cfg and returns a worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("baton: worker config: %w", err)
	}
	w := &Worker{
		cfg: cfg,
		store: fence.New(cfg.Redis, &fence.Options{Keys: fence.Keys{Prefix: cfg.Prefix}, Observer: historyWriter(cfg.History),
			ClaimReplicas: cfg.ClaimReplicas, ThreadRetention: cfg.ThreadRetention,
			CheckpointHistory: cfg.CheckpointHistory, MaxCheckpointBytes: cfg.MaxCheckpointBytes}),
		queue: newEnqueuer(cfg.Redis),
		kinds: map[string]Kind{},
		log:   cfg.Logger.With("component", "worker", "worker", cfg.ID),
		m:     cfg.Metrics,
	}
	w.store.SetWake(w.wake) // limits.go
	if _, cluster := cfg.Redis.(*redis.ClusterClient); !cluster {
		// Well within the lease: a heartbeat renewed it at most an
		// interval before the handler ended.
		w.acks = newAcks(min(time.Second, cfg.LeaseTTL/4))
	}
	w.hb = newHeartbeater(heartbeaterParams{store: w.store, ttl: cfg.LeaseTTL, interval: cfg.HeartbeatInterval,
		logger: cfg.Logger.With("component", "heartbeater", "worker", cfg.ID), metrics: cfg.Metrics})
	w.cw = newCancelWatcher(cancelWatcherParams{redis: cfg.Redis, channel: w.store.Keys().CancelChannel(), hb: w.hb,
		logger: cfg.Logger.With("component", "cancel_watcher", "worker", cfg.ID)})
	w.sweep = &sweeper{store: w.store, queue: w.queue, interval: cfg.SweepInterval, retention: cfg.Retention, busyEvery: retainBusyEvery,
		opts: fence.SweepOptions{Grace: cfg.Grace, Threshold: cfg.ReadyThreshold, Limit: 200,
			// Two ticks: long enough that a hand-out is enqueued and
			// claimed before another sweeper repeats it, short enough
			// that a sweeper whose link fails right after it swept (its
			// reply lost) delays a takeover by little more than a tick.
			Retry: max(2*cfg.SweepInterval, cfg.Grace)},
		log: cfg.Logger.With("component", "sweeper", "worker", cfg.ID), m: cfg.Metrics,
		adTTL: max(10*cfg.SweepInterval, 5*time.Second), hb: w.hb}
	if cfg.ScheduleInterval > 0 {
		cl, err := client.New(client.Config{Redis: cfg.Redis, Prefix: cfg.Prefix, Limits: cfg.ScheduleLimits})
		if err != nil {
			return nil, fmt.Errorf("baton: scheduler: %w", err)
		}
		w.sched = newScheduler(schedulerParams{client: cl, interval: cfg.ScheduleInterval, late: cfg.ScheduleLate,
			logger: cfg.Logger.With("component", "scheduler", "worker", cfg.ID), metrics: cfg.Metrics})
	}
	return w, nil
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Register adds a node kind. Call it before Start.
func (w *Worker) Register(kind string, k Kind) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kinds[kind] = k
}

// Start loads the scripts and starts the Asynq server, the heartbeater, the
// cancel watcher and the sweeper. It returns once they run and the cancel
// watcher's subscription is confirmed.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("baton: worker already started")
	}
	if err := w.loadScripts(ctx); err != nil {
		return err
	}
	w.cont = fence.Continue{TTL: w.cfg.LeaseTTL, Kinds: w.kindNames()}
	for q := range w.cfg.Queues {
		w.cont.Queues = append(w.cont.Queues, q)
	}
	slices.Sort(w.cont.Queues)
	w.pause = newPauseWatch(w.cfg.Redis, w.cont.Queues, w.cfg.Logger.With("component", "pause_watch", "worker", w.cfg.ID))
	w.sweep.self = fence.WorkerInfo{ID: w.cfg.ID, Kinds: w.cont.Kinds, Queues: w.cont.Queues,
		Concurrency: w.cfg.Concurrency, StartedAt: time.Now()}
	if w.cfg.Jobs != nil {
		b, err := json.Marshal(w.cfg.Jobs)
		if err != nil {
			return fmt.Errorf("baton: worker config: jobs: %w", err)
		}
		w.sweep.self.Jobs = b
	}
	base, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	w.cancel = cancel
	w.srv = nil
	for _, n := range split(w.cfg.Concurrency, w.cfg.Dispatchers) {
		w.srv = append(w.srv, asynq.NewServerFromRedisClient(w.serverClient(), asynq.Config{
			Concurrency:       n,
			Queues:            w.cfg.Queues,
			TaskCheckInterval: w.cfg.PollInterval,
			// Retries wait as scheduled tasks; Asynq's 5s default would add up
			// to 5s to every backoff.
			DelayedTaskCheckInterval: max(w.cfg.PollInterval, 100*time.Millisecond),
			// Shutdown waits ShutdownTimeout for handlers itself before it stops
			// the servers; Asynq must not wait that long a second time.
			ShutdownTimeout: time.Second,
			RetryDelayFunc:  retryDelay,
			IsFailure: func(err error) bool {
				return !errors.Is(err, fence.ErrNotDue) && !errors.Is(err, fence.ErrKindNotServed)
			},
			Logger:      asynqLogger{w.cfg.Logger.With("component", "asynq")},
			LogLevel:    asynq.WarnLevel,
			BaseContext: func() context.Context { return base },
		}))
	}
	// Subscribed before the first claim: a cancel of a node this worker
	// claims is pushed to it.
	w.cw.start(base)
	w.pause.start(base) // read once before the first commit
	if err := w.srv.start(asynq.HandlerFunc(w.process)); err != nil {
		cancel(ErrShutdown)
		w.cw.wait()
		w.pause.wait()
		return fmt.Errorf("baton: start asynq server: %w", err)
	}
	w.hb.start(base)
	w.sweep.advertise(base) // listed from the moment Start returns
	w.sweep.start(base)
	if w.sched != nil {
		w.sched.start(base)
	}
	w.started = true
	w.log.Info("worker_started", "concurrency", w.cfg.Concurrency, "dispatchers", len(w.srv), "lease_ttl", w.cfg.LeaseTTL,
		"heartbeat_interval", w.cfg.HeartbeatInterval, "poll_interval", w.cfg.PollInterval)
	return nil
}

// Shutdown drains the worker: no new deliveries; running handlers are
// cancelled with ErrShutdown and have until ShutdownTimeout to return; each
// lease is released and its node re-enqueued so another worker resumes it
// at once. Leases of handlers that do not return in time are recovered by
// lease expiry. Shutdown is idempotent.
func (w *Worker) Shutdown() {
	w.mu.Lock()
	if !w.started || w.stopping {
		w.mu.Unlock()
		return
	}
	w.stopping = true
	w.mu.Unlock()
	w.log.Info("worker_stopping", "running", w.hb.count())
	w.srv.stop() // stop fetching
	w.hb.cancelAll(ErrShutdown)
	w.activeMu.Lock()
	w.draining = true
	w.activeMu.Unlock()
	done := make(chan struct{})
	go func() { w.active.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.ShutdownTimeout):
		w.log.Warn("shutdown_timeout", "still_running", w.hb.count())
	}
	w.cancel(ErrShutdown)
	w.hb.wait()
	w.cw.wait()
	w.pause.wait()
	w.sweep.wait()
	if w.sched != nil {
		w.sched.wait()
		_ = w.sched.client.Close()
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Second)
	w.sweep.withdraw(wctx)
	wcancel()
	w.srv.shutdown()
	w.log.Info("worker_stopped")
}

// serverClient is the redis client of the worker's Asynq servers: one
// that sends a held commit with its task's acknowledgement (trip.go).
func (w *Worker) serverClient() redis.UniversalClient {
	if w.acks == nil {
		return w.cfg.Redis
	}
	return ackClient{UniversalClient: w.cfg.Redis, acks: w.acks}
}

// enter counts a handler in, unless the worker is draining.
func (w *Worker) enter() bool {
	w.activeMu.Lock()
	defer w.activeMu.Unlock()
	if w.draining {
		return false
	}
	w.active.Add(1)
	return true
}

// Kill stops the worker as a crash would: heartbeats stop, handlers are
// abandoned without releasing or writing anything, and their leases are
// left to expire. It exists for fault tests and demos.
func (w *Worker) Kill() {
	w.mu.Lock()
	if !w.started || w.stopping {
		w.mu.Unlock()
		return
	}
	w.stopping = true
	w.mu.Unlock()
	w.hb.kill()
	w.cancel(errKilled)
	if w.acks != nil {
		for range w.acks.dropAll() {
			w.active.Done() // a crash sends no held commit
		}
	}
	w.srv.stop()
	w.hb.wait()
	w.cw.wait()
	w.pause.wait()
	w.sweep.wait()
	w.srv.shutdown()
}

func (w *Worker) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

var errKilled = errors.New("baton: worker killed")

// loadScripts loads the scripts, waiting while Redis is still loading its
// dataset (a restart from its AOF answers LOADING for a while): a runner
// started with its Redis must not exit for that. Any other error returns.
func (w *Worker) loadScripts(ctx context.Context) error {
	delay := 50 * time.Millisecond
	for {
		err := w.store.Load(ctx)
		if err == nil || !strings.Contains(err.Error(), "LOADING") {
			return err
		}
		w.log.Warn("redis_loading", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// historyWriter returns a fence observer that writes each call as one JSON
// line to w, or nil when w is nil.
func historyWriter(w io.Writer) func(fence.Op) {
	if w == nil {
		return nil
	}
	var mu sync.Mutex
	return func(op fence.Op) {
		b, _ := json.Marshal(op) // cannot fail: strings and numbers only
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(append(b, '\n'))
	}
}

// retryDelay is Asynq's delay before redelivering a task whose handler
// returned an error: baton's state was unreachable, the node is not due,
// or this worker does not run its kind.
func retryDelay(n int, err error, _ *asynq.Task) time.Duration {
	var nd *fence.NotDueError
	if errors.As(err, &nd) {
		return max(time.Until(nd.ReadyAt), 10*time.Millisecond)
	}
	var ke *fence.KindError
	if errors.As(err, &ke) {
		return kindRetryDelay(time.Since(ke.ReadyAt))
	}
	return min(time.Duration(1<<min(n, 5))*time.Second, 30*time.Second)
}

// Redelivery of a node that a worker refused for its kind: a quarter of
// the time the node has waited so far, between kindRetryMin and
// kindRetryMax, with jitter. Asynq does not count these retries (they are
// not failures), so the delay grows with the node's wait instead: a capable
// worker gets a fresh node at once, and workers that cannot run a node
// nobody serves look at it ever more rarely, never in a busy loop.
const (
	kindRetryMin = 20 * time.Millisecond
	kindRetryMax = 5 * time.Second
)

func kindRetryDelay(waited time.Duration) time.Duration {
	d := min(max(waited/4, kindRetryMin), kindRetryMax)
	return d/2 + rand.N(d/2+1)
}

// DefaultDispatchers is how many Asynq servers a worker runs unless
// WorkerConfig.Dispatchers says otherwise (measured: see the README's
// Performance).
const DefaultDispatchers = 3

// maxDispatchers bounds WorkerConfig.Dispatchers: each server adds its own
// background loops and Redis connections.
const maxDispatchers = 16

// DefaultPollInterval is an idle Asynq server's TaskCheckInterval unless
// WorkerConfig.PollInterval says otherwise. After an empty dequeue a loop
// sleeps between half and one and a half of it, so it sets submit-to-start
// latency (about half of it at the median) and the idle cost: each loop
// polls Redis about once per interval when there is nothing to do.
const DefaultPollInterval = 10 * time.Millisecond

// DefaultRetention is how long a finished run stays readable by default.
const DefaultRetention = 7 * 24 * time.Hour

// backoff is the delay before a node's next attempt after a failure: the
// node's retry policy (read from its hash only now, on the failure path,
// never on a claim), its unset fields the worker's RetryBase and RetryMax.
// If the policy cannot be read, the defaults apply.
func (w *Worker) backoff(ctx context.Context, l fence.Lease) time.Duration {
	stored, used, err := w.store.RetryPolicy(ctx, fence.NodeRef{Thread: l.Thread, Run: l.Run, Node: l.Node})
	if err != nil {
		w.log.Warn("retry_policy_unread", "run_id", l.Run, "node_id", l.Node, "err", err)
		stored, used = "", l.Attempt
	}
	return spec.RetryDelay(stored, used, w.cfg.RetryBase, w.cfg.RetryMax)
}
