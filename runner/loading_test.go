package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// callCounter counts the commands a client sends.
type callCounter struct{ n atomic.Int64 }

func (c *callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A worker started while Redis is still loading its dataset (a restart from
// its AOF answers LOADING) waits for it instead of failing.
func TestStartWaitsForRedisLoading(t *testing.T) {
	t.Parallel()
	m, rdb := redistest.Mini(t)
	calls := &callCounter{}
	rdb.(*redis.Client).AddHook(calls)
	m.SetError("LOADING Redis is loading the dataset in memory")
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, ID: "patient"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	started := make(chan error, 1)
	go func() { started <- w.Start(ctx) }()

	require.Eventually(t, func() bool { return calls.n.Load() >= 2 }, 5*time.Second, 5*time.Millisecond,
		"the worker tried to load its scripts, and again")
	select {
	case err := <-started:
		t.Fatalf("Start returned while Redis was loading: %v", err)
	default:
	}
	m.SetError("")
	require.NoError(t, recv(t, started, 10*time.Second))
	w.Shutdown()
}
