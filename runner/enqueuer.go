package runner

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

// enqueuer is the runtime's handle on internal/delivery, which puts nodes
// on Asynq's queues for the client and the runtime alike; the sweeper
// calls it by the names it had before the client moved out of this
// package.
type enqueuer struct{ delivery.Enqueuer }

// newEnqueuer returns an enqueuer over rdb.
func newEnqueuer(rdb redis.UniversalClient) enqueuer { return enqueuer{delivery.New(rdb)} }

func (e enqueuer) enqueue(ctx context.Context, n fence.NodeRef, queue string, nextAttempt int64, processAt time.Time) error {
	return e.Enqueue(ctx, n, queue, nextAttempt, processAt)
}

func (e enqueuer) enqueueNew(ctx context.Context, n fence.NodeRef, queue string, nextAttempt int64, processAt time.Time) (bool, error) {
	return e.EnqueueNew(ctx, n, queue, nextAttempt, processAt)
}

func (e enqueuer) redeliverStuck(ctx context.Context, n fence.NodeRef, queue string, attempt int64, window time.Duration) (bool, error) {
	return e.RedeliverStuck(ctx, n, queue, attempt, window)
}

// advance is delivery.Advance: start the thread's next queued run if its
// active run has ended, and enqueue that run's ready nodes.
func advance(ctx context.Context, store *fence.Store, q enqueuer, thread, who string) (string, error) {
	return delivery.Advance(ctx, store, q.Enqueuer, thread, who)
}

// terminal reports whether a run status is final.
func terminal(status string) bool { return delivery.Terminal(status) }
