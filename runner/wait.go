package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/batonrun/baton/fence"
)

// Wait parks a node until someone answers: a handler returns Park(w) to
// end its attempt that way. The node becomes WAITING with w.Request; it
// holds no lease and no worker slot, and no attempt is counted. A resume
// (Client.Resume, `enqueue resume`, POST /v1/runs/{id}/nodes/{node}/resume)
// makes it READY again, and its next attempt reads the answer with
// Task.ResumeValue. The run stays RUNNING, so its thread stays busy.
type Wait struct {
	// Request is what the node asks, JSON, shown by status and the run
	// view. Empty: null.
	Request json.RawMessage
	// Timeout, when above zero, ends the wait after that long: OnTimeout
	// "fail" (the default) fails the node without running it again;
	// "resume" resumes it with Default.
	Timeout   time.Duration
	OnTimeout string
	Default   json.RawMessage
}

// parkError is the error Park returns, for the worker to find.
type parkError struct{ w Wait }

func (e *parkError) Error() string { return "node parked: waiting to be resumed" }

// Park returns the error a handler returns to park its node (see Wait):
//
//	if v, ok := task.ResumeValue(); ok {
//		return approved(v)
//	}
//	return nil, runner.Park(runner.Wait{Request: json.RawMessage(`{"ask":"deploy?"}`)})
func Park(w Wait) error { return &parkError{w: w} }

// ErrWaitTimedOut fails the attempt of a node whose wait timed out with
// outcome "fail"; the handler is not run.
var ErrWaitTimedOut = errors.New("runner: wait timed out")

// ResumeValue returns the value the node's wait was answered with, and
// whether it was resumed at all: an attempt after a resume reads it.
func (t *Task) ResumeValue() (json.RawMessage, bool) {
	if t.resume == nil || t.resume.Error != "" {
		return nil, false
	}
	v := t.resume.Value
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	return v, true
}

// ResumedWait returns the id of the wait the node's resume answered ("":
// not resumed), so an attempt can tell one answer from the next.
func (t *Task) ResumedWait() string {
	if t.resume == nil {
		return ""
	}
	return t.resume.Wait
}

// park ends the attempt by parking its node. A refusal means the claim is
// gone (IsFenced): nothing was written.
func (w *Worker) park(ctx context.Context, log *slog.Logger, c *Claimed, pe *parkError) {
	l := c.Lease
	waitID := fence.NewClaimID() // the same on every retry
	var p fence.Parked
	err := retry(ctx, func() error {
		var err error
		p, err = w.store.Park(ctx, l, fence.Wait{ID: waitID, Request: pe.w.Request, Timeout: pe.w.Timeout,
			OnTimeout: pe.w.OnTimeout, Default: pe.w.Default})
		return err
	})
	switch {
	case fence.IsFenced(err):
		w.m.StaleRejected.WithLabelValues("park").Inc()
		log.Warn("stale_write_rejected", "op", "park", "err", err)
		staleRejected(ctx, "park", l, err)
	case errors.Is(err, fence.ErrInvalidData), errors.Is(err, fence.ErrTooLarge), errors.Is(err, fence.ErrInvalidID):
		// A request the store cannot take fails the node, saying why.
		w.fail(ctx, log, c, Permanent(fmt.Errorf("park: %w", err)), false, fence.Spend{})
	case err != nil:
		log.Warn("park_failed", "err", err) // lease expiry recovers the node
	case p.Cancelled:
		log.Info("node_cancelled", "run_status", p.RunStatus)
		setOutcome(ctx, "cancelled")
		w.runEnded(ctx, l, p.RunStatus)
	default:
		log.Info("node_parked", "wait_id", p.WaitID)
		setOutcome(ctx, "parked")
		attemptFrom(ctx).event("park", attribute.String("baton.wait.id", p.WaitID))
	}
}

// timeOutWaits ends the waits whose timeout passed and enqueues their
// nodes (the sweeper's pass).
func (s *sweeper) timeOutWaits(ctx context.Context) {
	due, err := s.store.TimeOutWaits(ctx, "sweeper", int64(s.opts.Limit))
	if err != nil && ctx.Err() == nil {
		s.log.Warn("sweep_failed", "what", "waits", "err", err)
	}
	for _, d := range due {
		if err := s.queue.Enqueue(ctx, d.Node, d.Queue, d.Attempt+1, time.Time{}); err != nil {
			s.log.Warn("enqueue_failed", "run_id", d.Node.Run, "node_id", d.Node.Node, "err", err)
			continue
		}
		s.m.SweeperActions.WithLabelValues("wait_timed_out").Inc()
		s.log.Info("sweep_enqueued", "run_id", d.Node.Run, "node_id", d.Node.Node, "action", "wait_timed_out")
	}
}
