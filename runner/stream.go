package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"

	"github.com/batonrun/baton/fence"
)

// ErrNoStreamStore: the task was made outside a worker (NewTask), so it
// has no store to stream to.
var ErrNoStreamStore = errors.New("baton: task has no stream store")

// taskStream numbers an attempt's stream batches (fence.Store.AppendStream's
// seq). One per Task, so per claim: a takeover's attempt starts at 0.
type taskStream struct {
	mu   sync.Mutex // one batch at a time, so batches arrive in seq order
	next int64
}

// Stream appends chunks to the run's stream (GET /v1/runs/{id}/stream,
// enqueue stream), in order, one batch per call. Readers see them live.
//
// The store accepts them only from the current claim of the RUNNING node:
// a refusal (the node was taken over or ended) matches fence.IsFenced,
// nothing was appended, the attempt's context is cancelled with
// ErrLeaseLost as for a refused heartbeat, and the handler must stop. Once
// the attempt has lost its lease nothing is sent and the error wraps
// ErrLeaseLost. A chunk over the store's size cap is refused with
// fence.ErrTooLarge, data that is not JSON with fence.ErrInvalidData.
//
// Redis and network errors are retried with the batch's seq, so a batch
// whose reply was lost is appended once; retries end with ctx, with the
// lease, or after the lease TTL. Calls from several goroutines are
// serialised. The attempt's first batch is preceded in the stream by a
// "metadata" entry ({"run_id", "attempt"}) marking where it starts.
func (t *Task) Stream(ctx context.Context, chunks ...fence.StreamChunk) error {
	if len(chunks) == 0 {
		return nil
	}
	c := t.ckpt
	if c == nil {
		return fmt.Errorf("stream %s: %w", t.Lease, ErrNoStreamStore)
	}
	if errors.Is(context.Cause(c.attempt), ErrLeaseLost) {
		return fmt.Errorf("stream %s: not sent: %w", t.Lease, ErrLeaseLost)
	}
	t.stream.mu.Lock()
	defer t.stream.mu.Unlock()
	seq := t.stream.next
	// Whatever the outcome, the next batch takes the next numbers: a batch
	// that may have been stored is never answered for another.
	t.stream.next += int64(len(chunks))
	ctx, stop := c.bound(ctx)
	defer stop()
	err := retry(ctx, func() error {
		_, err := c.store.AppendStream(ctx, t.Lease, seq, chunks)
		return err
	})
	switch {
	case err == nil:
		return nil
	case fence.IsFenced(err):
		c.m.StaleRejected.WithLabelValues("stream").Inc()
		c.log.Warn("stale_write_rejected", "op", "stream", "err", err)
		t.tr.event("stale_rejected", attribute.String("baton.op", "stream"), attribute.Int64("baton.epoch", t.Lease.Epoch),
			attribute.String("baton.reason", err.Error()))
		c.lost(err.Error())
	case errors.Is(context.Cause(ctx), ErrLeaseLost):
		return fmt.Errorf("%w (%w)", err, ErrLeaseLost)
	}
	return err
}
