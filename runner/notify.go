package runner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

// Run-completion webhooks. Submit records a run's "notify" URL and puts
// the run on a pending index before the run is stored (fence.ArmNotify).
// Every Notifier scans that index each Interval; a run that has ended gets
// one Asynq task (TaskID "notify:<thread>:<run>", kept for a day after it
// completes, so a second enqueue is refused) on the Notifier's own queue,
// and only then leaves the index. The task POSTs the run's outcome,
// signed, and is retried with exponential backoff until the receiver
// answers 2xx or MaxAttempts are used; the record then says when it was
// delivered, or the last error, and the task stays archived in Asynq.
// Nothing depends on the process that ended the run: if it dies, any
// Notifier's next scan finds the run.

// NotifyTaskType is the Asynq task type of a webhook delivery.
const NotifyTaskType = "baton:notify"

// Webhook headers.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// '<t>.<body>' keyed with the secret>".
	SignatureHeader = "Baton-Signature"
	// DeliveryHeader names the delivery ("notify:<thread>:<run>"); a
	// retried delivery carries the same value, so receivers can dedupe.
	DeliveryHeader = "Baton-Delivery"
)

// WebhookPayload is the JSON body POSTed when a run has ended.
type WebhookPayload struct {
	Type         string         `json:"type"` // "run.finished"
	Run          string         `json:"run"`
	Thread       string         `json:"thread,omitempty"`
	Status       string         `json:"status"` // SUCCEEDED, FAILED or CANCELLED
	CancelReason string         `json:"cancel_reason,omitempty"`
	CreatedAt    time.Time      `json:"created_at"`
	FinishedAt   *time.Time     `json:"finished_at,omitempty"`
	Nodes        map[string]int `json:"nodes"`            // node count by state
	Failed       []string       `json:"failed,omitempty"` // ids of FAILED nodes
}

// NotifierConfig configures a Notifier. Every zero value has a default.
type NotifierConfig struct {
	// Redis is the store and the queue's Redis. Required; not closed.
	Redis redis.UniversalClient
	// Prefix starts every baton key. Zero value: "baton".
	Prefix string
	// Secret keys the HMAC-SHA256 signature of every delivery; every
	// runner of a deployment must share it. Zero value: deliveries are
	// unsigned (no Baton-Signature header), with a warning at the first.
	Secret string
	// Queue is the Asynq queue of deliveries, served by the Notifier's own
	// Asynq server (so node queues never wait behind a slow receiver).
	// Zero value: "baton-notify".
	Queue string
	// Concurrency is how many deliveries run at once. Zero value: 4.
	Concurrency int
	// Interval is how often the pending index is scanned: a run's webhook
	// is queued within about Interval of its end. Zero value: 1s.
	Interval time.Duration
	// Timeout bounds one POST. Zero value: 10s.
	Timeout time.Duration
	// MaxAttempts bounds the POSTs of one delivery. Zero value: 50 (about
	// 7 hours at the default backoff).
	MaxAttempts int
	// RetryBase and RetryMax bound the exponential backoff between
	// attempts (with jitter). Zero values: 5s and 10m.
	RetryBase, RetryMax time.Duration
	// Retention is how long a delivered record stays readable; negative:
	// forever. Zero value: DefaultRetention.
	Retention time.Duration
	// PollInterval is how often the idle Asynq server looks for
	// deliveries. Zero value: 200ms.
	PollInterval time.Duration
	// Logger receives the Notifier's logs. Zero value: slog.Default().
	Logger *slog.Logger
	// HTTPClient sends the POSTs. Zero value: a client with Timeout, no
	// redirects followed (a redirect is an answer, not a 2xx), dialing
	// through Egress.
	HTTPClient *http.Client
	// Egress says which addresses webhooks may reach (the runner's
	// EGRESS_ALLOW); it applies to the default HTTPClient. Zero value:
	// public addresses only, so a run's notify URL cannot make the runner
	// call its own admin server or the private network.
	Egress *egress.Policy
}

// DefaultNotifyQueue is the Asynq queue of webhook deliveries.
const DefaultNotifyQueue = "baton-notify"

func (c *NotifierConfig) setDefaults() {
	c.Queue = cmp.Or(c.Queue, DefaultNotifyQueue)
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.Interval = cmp.Or(c.Interval, time.Second)
	c.Timeout = cmp.Or(c.Timeout, 10*time.Second)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 50)
	c.RetryBase = cmp.Or(c.RetryBase, 5*time.Second)
	c.RetryMax = cmp.Or(c.RetryMax, 10*time.Minute)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.PollInterval = cmp.Or(c.PollInterval, 200*time.Millisecond)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.Timeout, Transport: c.Egress.Transport(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
}

// Notifier delivers run-completion webhooks: a scan of the pending index
// that enqueues deliveries, and an Asynq server that runs them. Run one
// beside each Worker (cmd/runner does); they share the work.
type Notifier struct {
	cfg   NotifierConfig
	store *fence.Store
	queue *asynq.Client
	srv   *asynq.Server
	log   *slog.Logger

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{}
	// unsigned warns once, at the first webhook sent without a signature:
	// a runner whose runs have no webhook says nothing.
	unsigned sync.Once
}

// NewNotifier checks cfg and returns a Notifier.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	cfg.setDefaults()
	var errs []error
	if cfg.Redis == nil {
		errs = append(errs, errors.New("Redis is required"))
	}
	if cfg.MaxAttempts < 1 || cfg.Concurrency < 1 {
		errs = append(errs, errors.New("MaxAttempts and Concurrency must be positive"))
	}
	if cfg.RetryBase <= 0 || cfg.RetryMax < cfg.RetryBase {
		errs = append(errs, errors.New("want 0 < RetryBase <= RetryMax"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("baton: notifier config: %w", err)
	}
	return &Notifier{cfg: cfg, store: fence.New(cfg.Redis, &fence.Options{Keys: fence.Keys{Prefix: cfg.Prefix}}),
		queue: asynq.NewClientFromRedisClient(cfg.Redis), log: cfg.Logger.With("component", "notifier")}, nil
}

// Start starts the delivery server and the scan. Stop it with Shutdown.
func (n *Notifier) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.started {
		return errors.New("baton: notifier already started")
	}
	n.srv = asynq.NewServerFromRedisClient(n.cfg.Redis, asynq.Config{
		Concurrency:              n.cfg.Concurrency,
		Queues:                   map[string]int{n.cfg.Queue: 1},
		TaskCheckInterval:        n.cfg.PollInterval,
		DelayedTaskCheckInterval: n.cfg.PollInterval,
		ShutdownTimeout:          n.cfg.Timeout,
		RetryDelayFunc:           func(a int, _ error, _ *asynq.Task) time.Duration { return n.backoff(a) },
		Logger:                   asynqLogger{n.cfg.Logger.With("component", "asynq")},
		LogLevel:                 asynq.WarnLevel,
	})
	if err := n.srv.Start(asynq.HandlerFunc(n.deliver)); err != nil {
		return fmt.Errorf("baton: start notifier: %w", err)
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel, n.done = cancel, make(chan struct{})
	go n.scanLoop(base)
	n.started = true
	return nil
}

// Shutdown stops the scan, lets running deliveries finish (up to
// Timeout; Asynq requeues the rest) and stops the server. Idempotent.
func (n *Notifier) Shutdown() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started {
		return
	}
	n.started = false
	n.cancel()
	<-n.done
	n.srv.Shutdown()
	_ = n.queue.Close()
}

// backoff is the delay before retry a (1, 2, ...): RetryBase doubled per
// retry up to RetryMax, the upper half jittered.
func (n *Notifier) backoff(a int) time.Duration {
	d := min(n.cfg.RetryBase<<min(max(a-1, 0), 30), n.cfg.RetryMax)
	return d/2 + rand.N(d/2+1)
}

// notifyPayload is what a webhook's delivery task carries: which run
// ended. The run's outcome is read from Redis when the POST is made.
type notifyPayload struct {
	Thread string `json:"thread"`
	Run    string `json:"run"`
}

// notifyTaskID names a run's one delivery.
func notifyTaskID(thread, run string) string { return "notify:" + thread + ":" + run }

// orphanAfter is how long a pending entry may name a run that does not
// exist before it is dropped: the entry is written just before the run.
const orphanAfter = 10 * time.Minute

func (n *Notifier) scanLoop(ctx context.Context) {
	defer close(n.done)
	t := time.NewTicker(n.cfg.Interval)
	defer t.Stop()
	for {
		if err := n.Scan(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("notify_scan_failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Scan enqueues the deliveries of pending runs that have ended, once
// each. Runners call it every Interval; it is idempotent.
func (n *Notifier) Scan(ctx context.Context) error {
	pending, err := n.store.PendingNotifies(ctx, 200)
	if err != nil {
		return err
	}
	var done []fence.PendingNotify
	var errs []error
	for _, p := range pending {
		switch {
		case p.Status == "" && time.Since(p.ArmedAt) > orphanAfter:
			// Never stored (the submit failed after the record was
			// written), or expired by retention before it ended.
			n.log.Warn("notify_run_missing", "run_id", p.Run, "thread", p.Thread)
			done = append(done, p)
			continue
		case !delivery.Terminal(p.Status):
			continue
		}
		b, _ := json.Marshal(notifyPayload{Thread: p.Thread, Run: p.Run}) // strings only
		_, err := n.queue.EnqueueContext(ctx, asynq.NewTask(NotifyTaskType, b),
			asynq.TaskID(notifyTaskID(p.Thread, p.Run)), asynq.Queue(n.cfg.Queue),
			asynq.MaxRetry(n.cfg.MaxAttempts-1), asynq.Timeout(n.cfg.Timeout+5*time.Second),
			// The id stays taken a day after delivery: a second scan
			// that raced this one cannot queue the webhook again.
			asynq.Retention(24*time.Hour))
		if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
			errs = append(errs, fmt.Errorf("enqueue webhook of %s: %w", p.Run, err))
			continue // stays pending: the next scan tries again
		}
		done = append(done, p)
	}
	if err := n.store.NotifyQueued(ctx, done); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deliver runs one delivery task. It returns nil once the receiver
// answered 2xx (or the delivery cannot ever succeed: the run is gone), an
// error for Asynq to retry otherwise.
func (n *Notifier) deliver(ctx context.Context, t *asynq.Task) error {
	var p notifyPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || fence.ValidateID("thread", p.Thread) != nil ||
		fence.ValidateID("run", p.Run) != nil {
		return fmt.Errorf("webhook payload %q: %w", t.Payload(), asynq.SkipRetry)
	}
	log := n.log.With("run_id", p.Run)
	rec, err := n.store.NotifyRecordOf(ctx, p.Thread, p.Run)
	if errors.Is(err, fence.ErrNotFound) {
		log.Warn("webhook_record_missing")
		return nil
	}
	if err != nil {
		return err
	}
	if !rec.DeliveredAt.IsZero() {
		return nil // a duplicate task: delivered already
	}
	info, err := n.store.GetRun(ctx, p.Run)
	if errors.Is(err, fence.ErrNotFound) {
		log.Error("webhook_run_gone", "url", rec.URL)
		return fmt.Errorf("run %s is gone: %w", p.Run, asynq.SkipRetry)
	}
	if err != nil {
		return err
	}
	body, _ := json.Marshal(webhookPayload(info))
	id := notifyTaskID(p.Thread, p.Run)
	code, err := n.post(ctx, rec.URL, id, body)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	attempt, _ := asynq.GetRetryCount(ctx)
	attempt++
	if err == nil {
		if err := n.store.NotifyAttempt(rctx, p.Thread, p.Run, true, "", n.cfg.Retention); err != nil {
			log.Warn("webhook_record_failed", "err", err) // delivered all the same; a duplicate may follow
		}
		log.Info("webhook_delivered", "status", code, "attempt", attempt)
		return nil
	}
	if rerr := n.store.NotifyAttempt(rctx, p.Thread, p.Run, false, err.Error(), 0); rerr != nil {
		log.Warn("webhook_record_failed", "err", rerr)
	}
	if maxRetry, _ := asynq.GetMaxRetry(ctx); attempt > maxRetry {
		log.Error("webhook_given_up", "url", rec.URL, "attempts", attempt, "err", err)
	} else {
		log.Warn("webhook_failed", "url", rec.URL, "attempt", attempt, "err", err)
	}
	if errors.Is(err, egress.ErrRefused) {
		return fmt.Errorf("%w (%w)", err, asynq.SkipRetry) // the policy answers the same every time
	}
	return err
}

// post sends one signed delivery; an answer other than 2xx is an error.
func (n *Notifier) post(ctx context.Context, url, id string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "baton-webhook")
	req.Header.Set(DeliveryHeader, id)
	if n.cfg.Secret != "" {
		req.Header.Set(SignatureHeader, SignWebhook(n.cfg.Secret, time.Now(), body))
	} else {
		n.unsigned.Do(func() {
			n.log.Warn("webhooks_unsigned", "note", "WEBHOOK_SECRET is empty: run webhooks are sent without a signature")
		})
	}
	resp, err := n.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("webhook: receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

func webhookPayload(info *fence.RunInfo) WebhookPayload {
	p := WebhookPayload{Type: "run.finished", Run: info.ID, Thread: info.Thread, Status: info.Status,
		CancelReason: info.CancelReason, CreatedAt: info.CreatedAt, FinishedAt: info.FinishedAt, Nodes: map[string]int{}}
	for _, nd := range info.Nodes {
		p.Nodes[nd.State]++
		if nd.State == "FAILED" {
			p.Failed = append(p.Failed, nd.ID)
		}
	}
	return p
}
