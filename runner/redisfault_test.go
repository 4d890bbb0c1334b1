package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
)

// Redis stops answering in the middle of a run (the process is paused):
// writes fail and are retried, deliveries wait, and once Redis is back the
// run completes with every node committed exactly once. Nothing accepted is
// lost.
func TestRunSurvivesRedisPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	var paused atomic.Bool
	rec.block = func(ctx context.Context, task *runner.Task) error {
		if task.Lease.Node == "b" && paused.CompareAndSwap(false, true) {
			b.srv.Pause()
			time.AfterFunc(1500*time.Millisecond, b.srv.Resume) // the fault's duration
		}
		return nil
	}
	cfg := b.fastConfig("w1")
	cfg.LeaseTTL, cfg.HeartbeatInterval = 5*time.Second, time.Second
	b.worker(cfg, map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"pause","nodes":[{"id":"a","kind":"work"},{"id":"b","kind":"work","deps":["a"]},` +
		`{"id":"c","kind":"work","deps":["b"]},{"id":"d","kind":"work","deps":["b"]}]}`)

	info := b.waitRun(id, 60*time.Second)
	require.True(t, paused.Load(), "the fault was never injected")
	require.Equal(t, "SUCCEEDED", info.Status)
	committed := countEvents(b.events(id), "committed")
	require.Len(t, committed, 4)
	for node, n := range committed {
		require.Equal(t, 1, n, "node %s committed %d times", node, n)
	}
}
