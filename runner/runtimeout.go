package runner

import "context"

// timeOutRuns cancels what is left of the runs whose run-level timeout
// has passed (fence.Store.TimeOutRuns: checked and cancelled in one
// script). A running node is told at once, as by any cancel.
func (s *sweeper) timeOutRuns(ctx context.Context) {
	done, err := s.store.TimeOutRuns(ctx, "sweeper", int64(s.opts.Limit))
	if err != nil && ctx.Err() == nil {
		s.log.Warn("sweep_failed", "what", "run timeouts", "err", err)
	}
	for _, r := range done {
		s.m.SweeperActions.WithLabelValues("run_timed_out").Inc()
		s.log.Info("run_timed_out", "run_id", r.Run, "run_status", r.Status, "running", r.Running)
	}
}
