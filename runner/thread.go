package runner

import (
	"context"

	"github.com/batonrun/baton/fence"
)

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
