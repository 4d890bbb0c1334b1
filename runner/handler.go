package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
	"github.com/batonrun/baton/spec"
	"github.com/batonrun/baton/tracing"
)

// process handles one Asynq delivery. Delivery only triggers a claim; the
// claim script decides whether this worker runs the node. process returns
// nil once baton's state has recorded the outcome (including "someone else
// owns it" and "already done"), and an error only when that state could not
// be reached, so Asynq delivers again.
func (w *Worker) process(ctx context.Context, t *asynq.Task) error {
	presizeStack()
	ref, carried, err := delivery.DecodePayload(t.Payload())
	if err != nil {
		w.m.PoisonTasks.Inc()
		id, _ := asynq.GetTaskID(ctx)
		w.log.Error("poison_task", "task_id", id, "type", t.Type(), "err", err)
		return fmt.Errorf("task %s: %w: %w", id, err, asynq.SkipRetry) // archived, visible in the UI
	}
	if !w.enter() {
		// Delivered while this worker drains: Asynq delivers it again,
		// to a worker that is not stopping. Nothing was claimed.
		return fmt.Errorf("task for %s: %w", ref, ErrShutdown)
	}
	defer w.active.Done()
	base := ctx
	if tracing.Enabled() {
		ctx = w.joinRunTrace(base, ref, carried)
	}

	// One claim id for this claim and its retries: a retry after a lost
	// reply finds its own claim instead of leaving it orphaned. Retries go
	// on for well over a lease (outcomeRetry), since a claim whose replies
	// are being lost has usually been made; after that Asynq delivers
	// again. The lease is trusted from the start of the try that
	// succeeded: a replayed claim renews the lease it made.
	var claimStarted time.Time
	claimID := fence.NewClaimID()
	var c *Claimed
	cctx, ccancel := context.WithTimeout(ctx, w.outcomeRetry())
	err = retry(cctx, func() error {
		var err error
		claimStarted = time.Now()
		c, err = w.store.ClaimKinds(cctx, ref, w.cfg.ID, claimID, w.cont.Kinds, w.cfg.LeaseTTL, w.cfg.Grace)
		return err
	})
	ccancel()
	if err != nil {
		return w.refused(ctx, ref, err)
	}
	outcome := "claimed"
	if c.PrevOwner != "" {
		outcome = "takeover"
		w.m.Takeovers.Inc()
		w.log.Info("takeover", "run_id", ref.Run, "node_id", ref.Node, "epoch", c.Epoch, "prev_owner", c.PrevOwner)
	}
	w.m.claim(outcome)
	taskID, _ := asynq.GetTaskID(ctx)
	queue, _ := asynq.GetQueueName(ctx)
	// A commit may hand over the next node of a chain, or a node it took
	// from the queue, already claimed: run it in this same delivery,
	// without a queue round trip.
	taken := 0
	for c != nil {
		run, from := c.Run, queue
		if taken >= takesPerDelivery {
			from = ""
		}
		var took bool
		c, claimStarted, took = w.run(ctx, c, claimStarted, taskID, from)
		switch {
		case c == nil:
		case !took:
			w.m.Claims.WithLabelValues("continued").Inc()
		default: // from the queue: a node of another run, or a wide run's next root
			taken++
			w.m.Claims.WithLabelValues("taken").Inc()
			if c.Run != run && tracing.Enabled() {
				ctx = w.joinRunTrace(base, fence.NodeRef{Thread: c.Thread, Run: c.Run, Node: c.Node}, "")
			}
		}
	}
	return nil
}

// takesPerDelivery bounds the nodes one delivery's handler takes from its
// queue (fence.Continue.Take) before it returns, so that Asynq's choice
// among a worker's queues (their priorities) still decides every so often.
// Asynq's dequeue, done and the claim then cost one node in this many.
const takesPerDelivery = 32

// refused handles a claim that did not succeed.
func (w *Worker) refused(ctx context.Context, ref fence.NodeRef, err error) error {
	var expired *fence.ExpiredError
	switch {
	case errors.Is(err, fence.ErrNodeBusy):
		w.m.Claims.WithLabelValues("busy").Inc()
	case errors.Is(err, fence.ErrNodeDone):
		w.m.Claims.WithLabelValues("done").Inc()
	case errors.Is(err, fence.ErrNodeBlocked):
		w.m.Claims.WithLabelValues("blocked").Inc()
	case errors.Is(err, fence.ErrNodeWaiting):
		w.m.Claims.WithLabelValues("waiting").Inc() // a resume enqueues it again
	case errors.Is(err, fence.ErrNotFound):
		w.m.Claims.WithLabelValues("missing").Inc()
		w.log.Warn("claim_missing_node", "run_id", ref.Run, "node_id", ref.Node)
	case errors.Is(err, fence.ErrLimitWait):
		// No free slot: the node waits its turn; the claim that frees a
		// slot enqueues it again (limits.go).
		w.m.Claims.WithLabelValues("limit_wait").Inc()
	case errors.Is(err, fence.ErrNotDue):
		w.m.Claims.WithLabelValues("not_due").Inc()
		return err // Asynq redelivers when due (retryDelay)
	case errors.Is(err, fence.ErrKindNotServed):
		// Routing: the node waits for a worker that runs its kind. The
		// delivery goes back to the queue, later the longer the node has
		// waited (retryDelay), and is not counted as a failure.
		w.m.Claims.WithLabelValues("wrong_kind").Inc()
		w.log.Debug("claim_refused", "run_id", ref.Run, "node_id", ref.Node, "reason", err)
		return err
	case errors.As(err, &expired):
		w.m.Claims.WithLabelValues("expired").Inc()
		end, xerr := w.store.Expire(ctx, expired, w.cfg.ID, w.cfg.Grace)
		if xerr != nil && !errors.Is(xerr, fence.ErrLeaseActive) && !fence.IsFenced(xerr) {
			return xerr
		}
		if xerr == nil {
			w.log.Warn("node_expired", "run_id", ref.Run, "node_id", ref.Node, "reason", expired.Err,
				"prev_owner", expired.Lease.Owner, "run_status", end.RunStatus)
			w.runEnded(ctx, expired.Lease, end.RunStatus)
		}
	default:
		w.m.Claims.WithLabelValues("error").Inc()
		return err
	}
	w.log.Debug("claim_refused", "run_id", ref.Run, "node_id", ref.Node, "reason", err)
	return nil
}

// run executes a claimed node and records its outcome under its lease. It
// returns the successor its commit claimed for this worker, if any, with
// when that claim started. taskID is the delivery's Asynq task, whose
// acknowledgement a node with no dependents commits with, unless its
// commit may take the next node from queue, the delivery's (takeFrom; ""
// takes none).
func (w *Worker) run(ctx context.Context, c *Claimed, claimStarted time.Time, taskID, queue string) (next *Claimed, started time.Time, taken bool) {
	l := c.Lease
	log := nodeLogger(w.log, l)
	task := NewTask(l, c.Kind, c.Input, c.Timeout)
	task.Deps = c.DepResults
	task.resume = c.Resume
	ctx, at := w.startAttempt(ctx, c, claimStarted, taskID)
	task.tr = at
	held := false
	defer func() {
		if !held {
			at.finish()
		}
	}()

	hctx, cancel := context.WithCancelCause(withLease(ctx, l))
	defer cancel(nil)
	a := w.hb.add(l, task, claimStarted, cancel)
	task.ckpt = w.checkpointer(hctx, a, log)

	var result json.RawMessage
	var runErr error
	if c.Resume != nil && c.Resume.Error != "" {
		// The wait timed out with outcome "fail": the node fails, unrun.
		runErr = Permanent(fmt.Errorf("%w: %s", ErrWaitTimedOut, c.Resume.Error))
	} else {
		result, runErr = w.execute(hctx, c, task)
	}
	var parked *parkError
	// From here the lease is not renewed and cannot be lost: the outcome
	// is written once, under the claim, or not at all.
	lost := w.hb.finish(a)
	cause := context.Cause(hctx)
	if errors.Is(cause, errKilled) {
		return nil, time.Time{}, false // a simulated crash writes nothing
	}
	if at != nil {
		at.err = runErr
		if errors.Is(cause, ErrRunCancelled) {
			at.event("cancel")
		}
	}
	// Writes after the handler survive the handler's cancellation and are
	// retried, with the same identity, for well over a lease: a commit
	// whose replies are lost has usually been applied, and its retries
	// (answered as replays) keep renewing the continuation it claimed, so
	// giving up early would orphan that claim and cost the node an
	// attempt. The scripts, not this process, decide if a write counts.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), w.outcomeRetry())
	defer wcancel()
	sp := task.spend()
	if sp.Reported && !fence.Metered(l.Limits) {
		// Nothing to charge: said once per attempt, not an error.
		log.Warn("spend_ignored", "spent", sp.Cost, "reason", "the node names no limit with a cost")
	}

	switch {
	case lost && w.hb.wasSelfFenced(a):
		// This worker could not prove in time that it still owns the
		// node (renewals unheard: a partition, lost replies). Its result
		// is not committed; it gives the node back with a fenced release,
		// which Redis refuses if another worker took over meanwhile. A
		// release costs no attempt: faults of the link must not fail the
		// node.
		log.Warn("attempt_abandoned", "reason", "self_fenced", "handler_err", runErr)
		w.release(wctx, log, c, "lease not renewed in time")
	case lost:
		// Redis refused a renewal: another worker owns the node. Any
		// write would be refused; the attempt writes nothing.
		log.Warn("attempt_abandoned", "reason", cause, "handler_err", runErr)
		setOutcome(ctx, "abandoned")
	case runErr == nil:
		take := w.takeFrom(queue)
		if len(c.Dependents) == 0 && take == "" && w.holdCommit(ctx, taskID, log, c, result, sp) {
			held = true // the held commit ends the span
			return nil, time.Time{}, false
		}
		return w.commit(wctx, nil, log, c, result, sp, take)
	case errors.As(runErr, &parked):
		w.park(wctx, log, c, parked)
	case errors.Is(cause, ErrShutdown) || (cause != nil && w.isStopping()):
		w.release(wctx, log, c, "worker shutting down")
	default:
		w.fail(wctx, log, c, runErr, errors.Is(cause, ErrRunCancelled), sp)
	}
	return nil, time.Time{}, false
}

// Claimed is what a successful claim hands the runtime.
type Claimed = fence.Claimed

// execute runs the node's kind with its timeout, turning a panic into a
// failed attempt.
func (w *Worker) execute(ctx context.Context, c *Claimed, task *Task) (result json.RawMessage, err error) {
	kind, ok := w.kinds[c.Kind]
	if !ok {
		return nil, Permanent(fmt.Errorf("unknown node kind %q (registered: %v)", c.Kind, w.kindNames()))
	}
	// Input references to dependencies' results are resolved once, before
	// the kind sees the input; one that does not resolve never will.
	in, err := spec.ResolveRefs(task.Input, task.Deps)
	if err != nil {
		return nil, Permanent(fmt.Errorf("node %s: %w", c.Node, err))
	}
	task.Input = in
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, fmt.Errorf("node timeout %s exceeded", c.Timeout))
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("handler_panic", "run_id", c.Run, "node_id", c.Node, "panic", p, "stack", string(debug.Stack()))
			result, err = nil, fmt.Errorf("panic in %s handler: %v", c.Kind, p)
		}
	}()
	result, err = kind.Run(ctx, task)
	if err == nil && !json.Valid(result) {
		if len(result) == 0 {
			return json.RawMessage("null"), nil
		}
		return nil, Permanent(fmt.Errorf("kind %s returned a result that is not JSON", c.Kind))
	}
	return result, err
}

func (w *Worker) kindNames() []string {
	out := make([]string, 0, len(w.kinds))
	for k := range w.kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// holdCommit leaves the commit of a node with no dependents to be sent
// with its task's acknowledgement (trip.go), and reports whether it did:
// not on a cluster, nor when a commit for the task is held already.
func (w *Worker) holdCommit(ctx context.Context, taskID string, log *slog.Logger, c *Claimed, result json.RawMessage, sp fence.Spend) bool {
	if w.acks == nil || taskID == "" {
		return false
	}
	w.active.Add(1) // the handler is still counted: Shutdown has not stopped waiting
	held := w.acks.hold(taskID, func(via redis.Scripter) {
		defer w.active.Done()
		if via == nil {
			// Asynq lost its lease on the task, or no longer acknowledges
			// with the task id first: every such commit waits a while.
			w.m.CommitsAlone.Inc()
			log.Info("commit_unacknowledged", "task_id", taskID, "waited", w.acks.after)
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.outcomeRetry())
		defer cancel()
		w.commit(wctx, via, log, c, result, sp, "")
		attemptFrom(ctx).finish()
	})
	if !held {
		w.active.Done()
	}
	return held
}

// takeFrom is the queue a commit may take this worker's next node from
// (fence.Continue.Take): the delivery's, on a single server (where held
// commits are), unless the worker is stopping or NoTake is set, and only
// while the queue looks busy: the last take got a node, or none was tried
// for takeProbe. A commit with nothing to take goes alone, and its task's
// acknowledgement after it: a worker whose queue had nothing to take
// sends a last commit with the acknowledgement instead (holdCommit), one
// round trip for both, but for one probe in takeProbe. "": take none.
func (w *Worker) takeFrom(queue string) string {
	if w.acks == nil || queue == "" || w.cfg.NoTake || w.isStopping() {
		return ""
	}
	if w.tookLast.Load() {
		return queue
	}
	now := time.Now().UnixNano()
	last := w.probedAt.Load()
	if now-last < int64(takeProbe) || !w.probedAt.CompareAndSwap(last, now) {
		return ""
	}
	return queue
}

// takeProbe is how often a worker whose last take got nothing tries again.
const takeProbe = 100 * time.Millisecond

// commit records the result, retrying a lost reply: a replayed commit of
// the same claim is recognised by the script (and charges sp, the cost the
// attempt reported, once). Its first try goes through
// via when that is set (a held commit, with its task's acknowledgement).
// It returns the continuation the commit claimed, or the node it took from
// queue take ("": none), if any, with the start of the try that claimed it
// (a replay renews its lease).
func (w *Worker) commit(ctx context.Context, via redis.Scripter, log *slog.Logger, c *Claimed, result json.RawMessage, sp fence.Spend, take string) (next *Claimed, started time.Time, taken bool) {
	l := c.Lease
	var cont fence.Continue
	if !w.isStopping() {
		// One continuation claim id for this commit and its retries: a
		// retry after a lost reply gets back the continuation (or the
		// node taken) its first try claimed.
		// A chain does not continue onto a paused queue: its next node
		// is enqueued, and Asynq holds it until the queue is resumed. Nor
		// is a node taken from one (the script reads Asynq's pause).
		cont = w.cont
		cont.Queues = w.pause.openQueues()
		cont.ClaimID = fence.NewClaimID()
		cont.Take = take
	}
	var res fence.Committed
	err := retry(ctx, func() error {
		var err error
		started = time.Now()
		res, err = w.store.CommitVia(ctx, via, l, result, c.Dependents, cont, sp)
		return err
	})
	switch {
	case fence.IsFenced(err):
		w.m.StaleRejected.WithLabelValues("commit").Inc()
		log.Warn("stale_write_rejected", "op", "commit", "err", err)
		staleRejected(ctx, "commit", l, err)
		return nil, time.Time{}, false
	case err != nil:
		// The lease will expire and another worker will run the node again.
		log.Warn("commit_failed", "err", err)
		setOutcome(ctx, "commit_failed")
		return nil, time.Time{}, false
	}
	if cont.Take != "" {
		w.tookLast.Store(res.Taken)
	}
	setOutcome(ctx, "committed")
	// A Replay is this commit, whose first reply was lost; the event stream
	// keeps every commit, so the log line is for debugging only.
	w.m.Commits.Inc()
	log.Debug("committed", "ready", len(res.Ready), "run_status", res.RunStatus)
	if res.ThreadQueued { // the commit read the thread's queue: nothing waits otherwise
		w.runEnded(ctx, l, res.RunStatus)
	}
	// The continuation this commit claimed waits for these enqueues with
	// its lease already running. A queue that does not answer (the master
	// of one of Asynq's keys failing over) must not spend that lease: past
	// a quarter of it the dependents are left to the sweeper, which
	// delivers READY nodes after ReadyThreshold. Measured in internal/e2e's
	// failover test: 10 of 192 nodes' continuations self-fenced before
	// they began, each behind a 1.9s enqueue to a dead master.
	ectx := ctx
	if res.Next != nil && len(res.Ready) > 0 {
		var cancel context.CancelFunc
		ectx, cancel = context.WithDeadline(ctx, started.Add(w.cfg.LeaseTTL/4))
		defer cancel()
	}
	for i, id := range res.Ready {
		n := fence.NodeRef{Thread: l.Thread, Run: l.Run, Node: id}
		if err := w.queue.Enqueue(ectx, n, res.Queues[i], 1, time.Time{}); err != nil {
			log.Warn("enqueue_failed", "dependent", id, "err", err) // the sweeper delivers it
		}
	}
	return res.Next, started, res.Taken
}

func (w *Worker) fail(ctx context.Context, log *slog.Logger, c *Claimed, runErr error, cancelled bool, sp fence.Spend) {
	l := c.Lease
	f := fence.Failure{Err: runErr.Error(), Final: IsPermanent(runErr) || cancelled, Spend: sp}
	if !f.Final {
		f.Delay = w.backoff(ctx, l)
	}
	var end fence.Ended
	err := retry(ctx, func() error {
		var err error
		end, err = w.store.Fail(ctx, l, f, c.Descendants)
		return err
	})
	switch {
	case fence.IsFenced(err):
		w.m.StaleRejected.WithLabelValues("fail").Inc()
		log.Warn("stale_write_rejected", "op", "fail", "err", err)
		staleRejected(ctx, "fail", l, err)
		return
	case err != nil:
		log.Warn("fail_failed", "err", err)
		setOutcome(ctx, "fail_failed")
		return
	}
	switch end.Outcome {
	case fence.Retrying:
		setOutcome(ctx, "retry")
		w.m.Failures.WithLabelValues("retry").Inc()
		log.Info("attempt_failed", "err", runErr, "retry_at", end.ReadyAt)
		n := fence.NodeRef{Thread: l.Thread, Run: l.Run, Node: l.Node}
		if err := w.queue.Enqueue(ctx, n, c.Queue, l.Attempt+1, end.ReadyAt); err != nil {
			log.Warn("enqueue_failed", "err", err)
		}
	case fence.Failed:
		setOutcome(ctx, "failed")
		w.m.Failures.WithLabelValues("failed").Inc()
		log.Warn("node_failed", "err", runErr, "run_status", end.RunStatus)
		w.runEnded(ctx, l, end.RunStatus)
	case fence.Cancelled:
		setOutcome(ctx, "cancelled")
		w.m.Failures.WithLabelValues("cancelled").Inc()
		log.Info("node_cancelled", "run_status", end.RunStatus)
		w.runEnded(ctx, l, end.RunStatus)
	}
}

func (w *Worker) release(ctx context.Context, log *slog.Logger, c *Claimed, reason string) {
	l := c.Lease
	var end fence.Ended
	err := retry(ctx, func() error {
		var err error
		end, err = w.store.Release(ctx, l, reason)
		return err
	})
	switch {
	case fence.IsFenced(err):
		w.m.StaleRejected.WithLabelValues("release").Inc()
		log.Warn("stale_write_rejected", "op", "release", "err", err)
		staleRejected(ctx, "release", l, err)
		return
	case err != nil:
		log.Warn("release_failed", "err", err) // lease expiry recovers it
		setOutcome(ctx, "release_failed")
		return
	}
	setOutcome(ctx, "released")
	w.m.Releases.Inc()
	log.Info("released", "reason", reason)
	w.runEnded(ctx, l, end.RunStatus)
	if end.Outcome == fence.Retrying {
		n := fence.NodeRef{Thread: l.Thread, Run: l.Run, Node: l.Node}
		if err := w.queue.Enqueue(ctx, n, c.Queue, l.Attempt+1, time.Time{}); err != nil {
			log.Warn("enqueue_failed", "err", err) // the sweeper delivers it
		}
	}
}

// outcomeRetry bounds how long a claim or an attempt's outcome is retried
// with the same identity after Redis or network errors: well over a lease,
// since each retry that Redis runs renews the lease it concerns.
func (w *Worker) outcomeRetry() time.Duration { return max(3*w.cfg.LeaseTTL, 30*time.Second) }

// retry retries op on Redis/network errors (not on a script's answer)
// until ctx ends. op must carry the same identity (claim id, lease) on every
// try: the scripts recognise their own earlier success.
func retry(ctx context.Context, op func() error) error {
	delay := 50 * time.Millisecond
	for {
		err := op()
		if err == nil || !isTransient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

func isTransient(err error) bool {
	return !fence.IsRefused(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// presizeStack grows the goroutine's stack in one step while it is still
// shallow. Asynq runs each task on a new goroutine, whose stack starts at
// a few KiB; the claim, the handler and the commit (go-redis, JSON) then
// grew it by doubling, each time copying every frame below.
//
//go:noinline
func presizeStack() byte {
	var frame [12 << 10]byte
	return lastByte(frame[:])
}

//go:noinline
func lastByte(b []byte) byte { return b[len(b)-1] }
