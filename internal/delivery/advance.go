package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/batonrun/baton/fence"
)

// Advance starts the thread's next queued run if its active run has ended,
// and enqueues that run's ready nodes. Whoever sees a thread's run end
// calls it (the worker whose write ended it, a canceller, a submitter); the
// sweeper calls it for threads whose waiting runs were never started. It
// returns the run it started, or "".
func Advance(ctx context.Context, store *fence.Store, q Enqueuer, thread, who string) (string, error) {
	p, err := store.Promote(ctx, thread, who)
	if err != nil || p == nil {
		return "", err
	}
	var errs []error
	for i, id := range p.Ready {
		ref := fence.NodeRef{Thread: thread, Run: p.Run, Node: id}
		if err := q.Enqueue(ctx, ref, p.Queues[i], 1, time.Time{}); err != nil {
			errs = append(errs, err) // the sweeper delivers it
		}
	}
	return p.Run, errors.Join(errs...)
}

// Terminal reports whether a run status is final.
func Terminal(status string) bool {
	return status == "SUCCEEDED" || status == "FAILED" || status == "CANCELLED"
}
