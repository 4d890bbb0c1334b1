package runner

import (
	"context"
	"errors"
	"time"

	"github.com/batonrun/baton/fence"
)

// advance starts the thread's next queued run if its active run has ended,
// and enqueues that run's ready nodes. Whoever sees a thread's run end
// calls it (the worker whose write ended it, a canceller, a submitter); the
// sweeper calls it for threads whose waiting runs were never started. It
// returns the run it started, or "".
func advance(ctx context.Context, store *fence.Store, q enqueuer, thread, who string) (string, error) {
	p, err := store.Promote(ctx, thread, who)
	if err != nil || p == nil {
		return "", err
	}
	var errs []error
	for i, id := range p.Ready {
		ref := fence.NodeRef{Thread: thread, Run: p.Run, Node: id}
		if err := q.enqueue(ctx, ref, p.Queues[i], 1, time.Time{}); err != nil {
			errs = append(errs, err) // the sweeper delivers it
		}
	}
	return p.Run, errors.Join(errs...)
}

// terminal reports whether a run status is final.
func terminal(status string) bool {
	return status == "SUCCEEDED" || status == "FAILED" || status == "CANCELLED"
}

// runEnded is called after a write that left the run in status: a run of a
// thread that ended lets the thread's next run start.
func (w *Worker) runEnded(ctx context.Context, l fence.Lease, status string) {
	if !terminal(status) || l.Thread == l.Run {
		return
	}
	run, err := advance(ctx, w.store, w.queue, l.Thread, w.cfg.ID)
	if err != nil {
		w.log.Warn("thread_advance_failed", "thread", l.Thread, "err", err) // the sweeper starts it
		return
	}
	if run != "" {
		w.log.Info("thread_run_started", "thread", l.Thread, "run_id", run, "after", l.Run)
	}
}
