package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
	"github.com/batonrun/baton/spec"
)

// Config configures a Client.
type Config struct {
	// Redis is the store and the queue's Redis. Required. The Client does
	// not close it.
	Redis redis.UniversalClient
	// Prefix starts every baton key. Zero value: "baton".
	Prefix string
	// Limits bound what a submitted run may hold. Zero value: 1 MiB inputs,
	// 8 MiB specs, 1000 nodes, 3 attempts per node.
	Limits spec.Limits
}

// Client submits, inspects and cancels runs. It is safe for concurrent use.
type Client struct {
	store  *fence.Store
	queue  delivery.Enqueuer
	limits spec.Limits
	// rdb, when set, is the one server the client enqueues deliveries on
	// through a tripClient: a run's submit then carries the enqueue of its
	// first node (trip.go). Nil on a cluster.
	rdb redis.UniversalClient
	// scriptCached: a submit ran since the client started or last met a
	// Redis without the submit script (NOSCRIPT: started afresh, or its
	// script cache flushed). Until then a submit goes alone, caching the
	// script, rather than in a shared round trip whose enqueue would come
	// before its node.
	scriptCached atomic.Bool

	// The live runners as Submit last read them, for its warnings: a
	// burst of submits reads the listing once a second, not per run.
	liveMu sync.Mutex
	live   []fence.WorkerInfo
	liveAt time.Time
}

// liveFor is how long Submit reuses the listing of live runners.
const liveFor = time.Second

// SpecLimits returns the spec limits Submit applies, defaults filled in: a server
// refuses an oversized spec by the same MaxSpecBytes before reading it.
func (c *Client) SpecLimits() spec.Limits { return c.limits }

// New returns a Client over cfg.Redis.
func New(cfg Config) (*Client, error) {
	if cfg.Redis == nil {
		return nil, errors.New("baton: client Config.Redis is required")
	}
	c := &Client{
		store:  fence.New(cfg.Redis, &fence.Options{Keys: fence.Keys{Prefix: cfg.Prefix}}),
		limits: cfg.Limits.WithDefaults(),
	}
	if _, cluster := cfg.Redis.(*redis.ClusterClient); cluster {
		c.queue = delivery.New(cfg.Redis)
	} else {
		c.rdb = cfg.Redis
		c.queue = delivery.New(tripClient{cfg.Redis})
	}
	// A cancel that frees a limit slot handed to one of the run's nodes
	// hands it on; the next waiter's delivery is enqueued here, at once.
	c.store.SetWake(func(ctx context.Context, woken []fence.Woken) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = c.queue.Wake(ctx, woken) // one that fails is found by the sweeper's recheck
	})
	return c, nil
}

// Close releases what the client holds of its own: nothing today, since
// it enqueues through Config.Redis, which stays open. Call it all the
// same; a later client may hold more.
func (c *Client) Close() error { return nil }

// Store returns the fence store the client uses.
func (c *Client) Store() *fence.Store { return c.store }

// Submitted says what Submit did.
type Submitted struct {
	RunID   string `json:"id"`
	Thread  string `json:"thread,omitempty"`
	Status  string `json:"status"`
	Created bool   `json:"created"` // false: the same run existed already
	// Behind is the thread's active run this run is QUEUED behind.
	Behind string `json:"behind,omitempty"`
	// Warnings say what the run will wait for: a kind or queue that no
	// live runner serves ("no runner serves kind summarize on queue
	// default"), as the listing read at most a second ago says. The run is
	// stored all the same; its nodes wait READY until a runner that serves
	// them starts.
	Warnings []string `json:"warnings,omitempty"`
}

// Submit validates run, stores the run atomically and enqueues its ready
// nodes. A spec error is a *spec.Error (errors.Is spec.ErrInvalid); the same
// run id with another spec is fence.ErrRunConflict; a run for a busy thread
// is fence.ErrThreadBusy (multitask reject, or a run without a thread) or
// QUEUED (enqueue, interrupt, rollback; the last two cancel the active run
// in the same atomic step). If enqueueing fails
// after the run was stored, the run is not lost: the sweeper enqueues its
// READY nodes; the error is still returned.
func (c *Client) Submit(ctx context.Context, run *spec.Run) (Submitted, error) {
	return c.submitRun(ctx, run, false)
}

// SubmitServed is Submit for a caller that wants a mistyped kind caught at
// once: it refuses, storing nothing, a run with a node whose kind and
// queue no live runner serves as it reads the fleet now. The error is an
// *UnservedError (errors.Is ErrUnserved and spec.ErrInvalid) naming each
// such node's field, with the nearest kind a runner serves. Submit stores
// such a run, which waits READY until a runner of the kind starts, and
// says so in Submitted.Warnings.
func (c *Client) SubmitServed(ctx context.Context, run *spec.Run) (Submitted, error) {
	return c.submitRun(ctx, run, true)
}

func (c *Client) submitRun(ctx context.Context, run *spec.Run, requireServed bool) (Submitted, error) {
	if run == nil {
		_, err := run.Compile(c.limits)
		return Submitted{}, err
	}
	runID := run.ID
	if runID == "" {
		// The id is known before the spec is compiled: a limit named
		// "x:{run}" or "x:{thread}" of a run without a thread needs it.
		r := *run
		r.ID = "run-" + fence.NewClaimID()
		run, runID = &r, r.ID
	}
	compiled, err := run.Compile(c.limits)
	if err != nil {
		return Submitted{}, err
	}
	if err := c.checkPolicy(ctx, run); err != nil { // policy.go
		return Submitted{}, err
	}
	if err := c.checkLimits(ctx, compiled); err != nil { // limits.go
		return Submitted{}, err
	}
	if requireServed {
		if err := c.checkServed(ctx, compiled.Nodes); err != nil { // served.go
			return Submitted{}, err
		}
	}
	nodes := make([]fence.NodeSpec, len(compiled.Nodes))
	for i, n := range compiled.Nodes {
		nodes[i] = fence.NodeSpec(n)
	}
	ctx, span := startSubmit(ctx, runID, run.Thread)
	out, err := c.submit(ctx, run, runID, nodes, compiled.Digest)
	endSubmit(span, out.Status, err)
	return out, err
}

// submit stores the run and enqueues its first nodes; ctx carries the
// run's trace context when it has one.
func (c *Client) submit(ctx context.Context, run *spec.Run, runID string, nodes []fence.NodeSpec, digest string) (Submitted, error) {
	args := fence.SubmitArgs{Run: runID, Thread: run.Thread, Multitask: run.Multitask, Digest: digest,
		Nodes: nodes, StartIn: time.Duration(run.StartIn), Trace: string(delivery.RunTraceFrom(ctx)),
		Timeout: time.Duration(run.Timeout), TimeoutLabel: run.Timeout.String()}
	if run.StartAt != nil {
		args.StartAt = *run.StartAt
	}
	e := c.queue
	trip, carriedNode := c.submitTrip(e, args, nodes)
	if trip != nil {
		args.Scripter = trip
	}
	res, err := c.storeRun(ctx, args, run.Notify) // notify.go
	if trip != nil && trip.early {
		c.scriptCached.Store(false)
	} else if err == nil {
		c.scriptCached.Store(true)
	}
	if err != nil {
		return Submitted{}, c.explain(ctx, opSubmit, runID, "", cmp.Or(run.Thread, runID), err)
	}
	out := Submitted{RunID: runID, Status: res.Status, Created: res.Created, Behind: res.Behind}
	if res.Thread != runID {
		out.Thread = res.Thread
	}
	out.Warnings = c.unservedWarnings(ctx, nodes)
	queues := make(map[string]string, len(nodes))
	for _, n := range nodes {
		queues[n.ID] = n.Queue
	}
	var errs []error
	// A delayed run's tasks wait in Asynq's schedule until its start, as
	// the client's clock reads Redis's time; one delivered early finds its
	// node not due (the claim reads Redis's clock) and comes back then.
	var processAt time.Time
	if args.StartIn > 0 || !args.StartAt.IsZero() { // a resubmit has the same start: it is in the digest
		processAt = res.Start
	}
	for _, id := range res.Ready {
		ref := fence.NodeRef{Thread: res.Thread, Run: runID, Node: id}
		var err error
		switch {
		case trip != nil && id == carriedNode && trip.delivered:
			continue
		case trip != nil && id == carriedNode && trip.early:
			// The task that came before its node may be in a worker's
			// hands, about to be dropped as nothing to claim: a delivery
			// under an id of its own is not mistaken for it.
			_, err = e.EnqueueAs(ctx, delivery.TaskID(ref, 1)+"~submit", ref, queues[id], processAt)
		default:
			err = e.Enqueue(ctx, ref, queues[id], 1, processAt)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if res.Status == "QUEUED" {
		// The submit itself cancelled the active run (interrupt, rollback);
		// if that ended it, or it had ended before anyone started the next,
		// start the next now. Should this call not happen, the sweeper
		// does it.
		if _, err := delivery.Advance(ctx, c.store, e, res.Thread, "client"); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("run %s stored; the sweeper will deliver what failed to enqueue: %w", runID, errors.Join(errs...))
	}
	return out, nil
}

// submitTrip returns the Scripter that sends the submit of a run with the
// enqueue of its first node in one round trip, and that node; nil when
// the run is not sent that way (see trip.go): on a cluster, before the
// submit script is known to be cached, or for a run with a start time (its
// task waits for the start the script reads from Redis's clock). fence
// uses it only for a run whose thread has no active run.
func (c *Client) submitTrip(e delivery.Enqueuer, args fence.SubmitArgs, nodes []fence.NodeSpec) (*submitTrip, string) {
	if c.rdb == nil || !c.scriptCached.Load() || args.StartIn > 0 || !args.StartAt.IsZero() {
		return nil, ""
	}
	thread := cmp.Or(args.Thread, args.Run)
	for _, n := range nodes {
		if len(n.Deps) > 0 {
			continue
		}
		ref := fence.NodeRef{Thread: thread, Run: args.Run, Node: n.ID}
		return &submitTrip{UniversalClient: c.rdb, enqueue: func(ctx context.Context) error {
			return e.Enqueue(ctx, ref, n.Queue, 1, time.Time{})
		}}, n.ID
	}
	return nil, ""
}

// Status returns the run with its nodes, or fence.ErrNotFound. A READY
// node held by a paused queue, or that no live runner serves, says so in
// its Waiting field.
func (c *Client) Status(ctx context.Context, run string) (*fence.RunInfo, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return nil, err
	}
	info, err := c.store.GetRun(ctx, run)
	if err != nil {
		return nil, c.explain(ctx, opRead, run, "", "", err)
	}
	paused, err := c.readyPaused(ctx, info.Nodes)
	if err != nil {
		return nil, err
	}
	var live []fence.WorkerInfo
	for i, n := range info.Nodes {
		if n.State != "READY" {
			continue
		}
		if q := cmp.Or(n.Queue, "default"); paused[q] {
			info.Nodes[i].Waiting = pausedWaiting(q)
			continue
		}
		if live == nil {
			if live, err = c.store.Workers(ctx); err != nil {
				return nil, err
			}
		}
		if why := fence.Unserved(live, n.Kind, n.Queue); why != "" {
			info.Nodes[i].Waiting = "waiting: " + why
		}
	}
	return info, nil
}

// Workers lists the live runners with the kinds and queues they serve.
func (c *Client) Workers(ctx context.Context) ([]fence.WorkerInfo, error) {
	return c.store.Workers(ctx)
}

// unservedWarnings lists the (kind, queue) pairs of nodes that no live
// runner serves, once each. A failed read of the listing is no reason to
// refuse a run: it gives no warning.
func (c *Client) unservedWarnings(ctx context.Context, nodes []fence.NodeSpec) []string {
	live, err := c.liveWorkers(ctx) // policy.go
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range nodes {
		why := fence.Unserved(live, n.Kind, n.Queue)
		if why != "" && !seen[why] {
			seen[why] = true
			out = append(out, why)
		}
	}
	return out
}

// Events returns up to count of the run's events after the event id after
// ("": from the start; count <= 0: all).
func (c *Client) Events(ctx context.Context, run, after string, count int64) ([]fence.Event, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return nil, err
	}
	evs, err := c.store.Events(ctx, run, after, count)
	return evs, c.explain(ctx, opRead, run, "", "", err)
}

// Cancel cancels a run. Nodes not yet running are cancelled at once; the
// workers of running ones are told at once (a push, with the heartbeat as
// fallback), and those nodes end CANCELLED when their handlers return.
// Cancelling a cancelled run is a no-op; a finished run is
// fence.ErrRunDone.
func (c *Client) Cancel(ctx context.Context, run, reason string) (fence.CancelResult, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return fence.CancelResult{}, err
	}
	if reason == "" {
		reason = "cancelled by user"
	}
	res, err := c.store.Cancel(ctx, run, reason, "client")
	if err != nil {
		return res, c.explain(ctx, opCancel, run, "", "", err)
	}
	if !delivery.Terminal(res.RunStatus) {
		return res, nil
	}
	// The run ended at once (nothing was running): its thread's next run
	// may start (a run without a thread is its own thread's).
	if thread, err := c.store.Locate(ctx, run); err == nil {
		if _, err := delivery.Advance(ctx, c.store, c.queue, thread, "client"); err != nil {
			return res, fmt.Errorf("run %s cancelled; start the thread's next run: %w", run, err)
		}
	}
	return res, nil
}

// Retry re-runs a FAILED or CANCELLED run from its failed and cancelled
// nodes (fence.Store.Retry): the SUCCEEDED nodes keep their results and do
// not run again; each re-run node gets its max_attempts again under a newer
// epoch, so a late write from an earlier attempt is refused. retryID names
// the request (empty: a new one): the same id again is a Replay. A run
// RUNNING already is answered AlreadyRunning, not an error, so a request
// retried under another id succeeds too. A run that SUCCEEDED or is QUEUED
// is fence.ErrNotRetryable; a thread's run once the thread has moved on is
// fence.ErrNotActiveRun. If enqueueing fails after the retry was stored,
// the sweeper delivers the READY nodes; the error is still returned.
func (c *Client) Retry(ctx context.Context, run, retryID string) (fence.Retried, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return fence.Retried{}, err
	}
	if retryID == "" {
		retryID = fence.NewClaimID()
	}
	res, err := c.store.Retry(ctx, run, retryID, "client")
	if err != nil {
		return res, c.explain(ctx, opRetry, run, "", "", err)
	}
	var errs []error
	for i, id := range res.Ready {
		ref := fence.NodeRef{Thread: res.Thread, Run: run, Node: id}
		if err := c.queue.Enqueue(ctx, ref, res.Queues[i], res.Attempts[i]+1, time.Time{}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("run %s retried; the sweeper will deliver what failed to enqueue: %w", run, errors.Join(errs...))
	}
	return res, nil
}

// RunSummary is one line of List.
type RunSummary = fence.RunSummary

// List returns up to limit runs, newest first, whose status is status
// (empty: any). Each page of runs costs two round trips.
func (c *Client) List(ctx context.Context, status string, limit int) ([]RunSummary, error) {
	return c.ListRuns(ctx, ListOptions{Status: status, Limit: limit})
}
