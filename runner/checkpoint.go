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

// ErrNoCheckpointStore: the task was made outside a worker (NewTask), so it
// has no store to save checkpoints to or read them from.
var ErrNoCheckpointStore = errors.New("baton: task has no checkpoint store")

// checkpointer connects a Task to its worker's store. It knows the
// attempt's context, whose cause says whether the lease was lost, and how
// to end the attempt when the store refuses a save: the same way a refused
// heartbeat does.
type checkpointer struct {
	store   *fence.Store
	attempt context.Context
	ttl     time.Duration    // bounds a save's retries
	lost    func(why string) // the heartbeater's: cancels the attempt with ErrLeaseLost
	m       *Metrics
	log     *slog.Logger
}

// checkpointer returns what a's task uses to save checkpoints under a's
// lease; attempt is the handler's context.
func (w *Worker) checkpointer(attempt context.Context, a *active, log *slog.Logger) *checkpointer {
	return &checkpointer{store: w.store, attempt: attempt, ttl: w.cfg.LeaseTTL, m: w.m, log: log,
		lost: func(why string) { w.hb.lost(a, why) }}
}

// SaveCheckpoint saves data as the newest checkpoint of the node's thread
// in namespace ns, and returns it with the version the store assigned.
// data is JSON-encoded; a json.RawMessage is stored as it is.
//
// The store accepts it only from the current claim of a RUNNING node of
// the thread's active run. A refusal (the node was taken over, the run is
// no longer the thread's active run) matches fence.IsFenced: nothing was
// stored, the attempt's context is cancelled with ErrLeaseLost as for a
// refused heartbeat, and the handler must stop; its result will not be
// committed. Once the attempt has lost its lease (ErrLeaseLost, including
// a worker that stopped trusting its own lease), nothing is sent at all and
// the error wraps ErrLeaseLost.
//
// Each call saves one checkpoint under one new checkpoint id. Redis and
// network errors are retried with that id, so a save whose reply was lost
// is stored once; retries end with ctx, with the lease, or after the lease
// TTL. ctx may outlive the handler's context: a handler told to shut down
// (ErrShutdown) can save its last state with context.WithoutCancel(ctx).
func (t *Task) SaveCheckpoint(ctx context.Context, ns string, data any) (fence.Checkpoint, error) {
	raw, ok := data.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(data)
		if err != nil {
			return fence.Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: %w", t.Lease, ns, err)
		}
		raw = b
	}
	return t.SaveCheckpointWith(ctx, fence.CheckpointWrite{NS: ns, Data: raw})
}

// SaveCheckpointWith is SaveCheckpoint for a kind that names its
// checkpoints (an id, the parent it follows, metadata), such as a
// LangGraph saver. An empty w.ID gets a new id; a given one makes a second
// call with the same id under the same claim return the version the first
// saved.
func (t *Task) SaveCheckpointWith(ctx context.Context, w fence.CheckpointWrite) (fence.Checkpoint, error) {
	c := t.ckpt
	if c == nil {
		return fence.Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: %w", t.Lease, w.NS, ErrNoCheckpointStore)
	}
	if errors.Is(context.Cause(c.attempt), ErrLeaseLost) {
		return fence.Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: not sent: %w", t.Lease, w.NS, ErrLeaseLost)
	}
	if w.ID == "" {
		w.ID = fence.NewClaimID() // one id for this save and its retries
	}
	ctx, stop := c.bound(ctx)
	defer stop()
	var cp fence.Checkpoint
	err := retry(ctx, func() error {
		var err error
		cp, err = c.store.SaveCheckpoint(ctx, t.Lease, w)
		return err
	})
	switch {
	case err == nil:
		t.tr.event("checkpoint", attribute.String("baton.checkpoint.ns", w.NS), attribute.String("baton.checkpoint.id", w.ID))
		return cp, nil
	case fence.IsFenced(err):
		c.m.StaleRejected.WithLabelValues("checkpoint").Inc()
		c.log.Warn("stale_write_rejected", "op", "checkpoint", "ns", w.NS, "err", err)
		t.tr.event("stale_rejected", attribute.String("baton.op", "checkpoint"), attribute.Int64("baton.epoch", t.Lease.Epoch),
			attribute.String("baton.reason", err.Error()))
		c.lost(err.Error())
	case errors.Is(context.Cause(ctx), ErrLeaseLost):
		return fence.Checkpoint{}, fmt.Errorf("%w (%w)", err, ErrLeaseLost)
	}
	return fence.Checkpoint{}, err
}

// Checkpoint returns the newest checkpoint of the node's thread in
// namespace ns, or an error matching fence.ErrNoCheckpoint when there is
// none. Reading is not fenced: it changes nothing. Redis and network
// errors are retried as for SaveCheckpoint.
func (t *Task) Checkpoint(ctx context.Context, ns string) (*fence.Checkpoint, error) {
	c := t.ckpt
	if c == nil {
		return nil, fmt.Errorf("checkpoint %s ns %q: %w", t.Lease, ns, ErrNoCheckpointStore)
	}
	ctx, stop := c.bound(ctx)
	defer stop()
	var cp *fence.Checkpoint
	err := retry(ctx, func() error {
		var err error
		cp, err = c.store.LatestCheckpoint(ctx, t.Lease.Thread, ns)
		return err
	})
	return cp, err
}

// bound limits a call's retries to the lease TTL and to the attempt
// keeping its lease; a shutdown or a cancelled run does not end them.
func (c *checkpointer) bound(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	tctx, tcancel := context.WithTimeout(ctx, c.ttl)
	stop := context.AfterFunc(c.attempt, func() {
		if errors.Is(context.Cause(c.attempt), ErrLeaseLost) {
			cancel(ErrLeaseLost)
		}
	})
	return tctx, func() {
		stop()
		tcancel()
		cancel(nil)
	}
}
