package runner

import (
	"context"
	"time"

	"github.com/batonrun/baton/fence"
)

// wake enqueues the deliveries of nodes a freed limit slot was handed to
// (fence.Store.SetWake): each under an id of its own, so it never meets
// the waiting node's earlier task. One that fails to enqueue is found by
// the sweeper's recheck of waiting nodes; its slot's hold runs out.
func (w *Worker) wake(ctx context.Context, woken []fence.Woken) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	for n, err := range w.queue.Wake(ctx, woken) {
		w.log.Warn("limit_wake_failed", "run_id", n.Run, "node_id", n.Node, "err", err)
	}
}
