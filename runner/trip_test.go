package runner_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
)

// tripCounter counts round trips: a command or a pipeline is one.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// countingClient is a runner.Client whose round trips are counted.
func countingClient(t *testing.T, b *testBundle) (*runner.Client, *tripCounter) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: b.srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	trips := &tripCounter{}
	rdb.AddHook(trips)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, trips
}

// submitCounted submits spec and returns the run id and the round trips
// the submit took.
func submitCounted(t *testing.T, c *runner.Client, trips *tripCounter, spec string) (string, int64) {
	t.Helper()
	s, err := runner.ParseSpec([]byte(spec))
	require.NoError(t, err)
	before := trips.n.Load()
	res, err := c.Submit(context.Background(), s)
	require.NoError(t, err)
	return res.RunID, trips.n.Load() - before
}

// noSweepConfig is a worker whose sweeper would deliver a forgotten READY
// node only after an hour: a node that runs was delivered by its submit.
func noSweepConfig(b *testBundle, id string) runner.WorkerConfig {
	cfg := b.fastConfig(id)
	cfg.ReadyThreshold = time.Hour
	return cfg
}

// A run without a thread is stored and its first node enqueued in one
// round trip; each further ready node costs Asynq's own enqueue. Every
// node is delivered by the submit, none by the sweeper.
func TestSubmitCarriesTheFirstEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, trips := countingClient(t, b)
	rec := newRecorder()

	// The first submit on a client also registers the queue with Asynq
	// (SADD, once per client and queue) and may load the scripts.
	submitCounted(t, c, trips, `{"nodes":[{"id":"warm","kind":"work"}]}`)

	one, rt := submitCounted(t, c, trips, `{"id":"one-node","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, int64(1), rt, "a one-node run: the submit script and Asynq's enqueue in one round trip")

	wide, rt := submitCounted(t, c, trips, `{"id":"wide","nodes":[
		{"id":"a","kind":"work"},{"id":"b","kind":"work"},{"id":"c","kind":"work"},
		{"id":"d","kind":"work","deps":["a","b","c"]}]}`)
	require.Equal(t, int64(3), rt, "three ready nodes: the first carried by the submit, two enqueues after")

	again, rt := submitCounted(t, c, trips, `{"id":"one-node","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, one, again)
	require.Equal(t, int64(1), rt, "a resubmit: one round trip too (its node's task is there already)")

	b.worker(noSweepConfig(b, "tripper"), map[string]runner.Kind{"work": rec})
	for _, id := range []string{one, wide} {
		info := b.waitRun(id, 10*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, "run %s: %+v", id, info.Nodes)
	}
	for _, node := range []string{"b", "c", "d"} {
		require.Equal(t, 1, rec.count(node), "node %s of the wide run ran once", node)
	}
	require.Equal(t, 2, rec.count("a"), "node a ran once in each run")
}

// A submit sent with its enqueue while Redis has forgotten its scripts (a
// restart, SCRIPT FLUSH) is sent again alone; its node is enqueued again
// after it and runs, not waiting for the sweeper.
func TestSubmitCarryAfterScriptFlush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, trips := countingClient(t, b)
	rec := newRecorder()
	b.worker(noSweepConfig(b, "flushed"), map[string]runner.Kind{"work": rec})

	var ids []string
	for i := range 3 {
		require.NoError(t, b.rdb.ScriptFlush(context.Background()).Err())
		id, _ := submitCounted(t, c, trips, fmt.Sprintf(`{"id":"flushed-%d","nodes":[{"id":"a","kind":"work"}]}`, i))
		ids = append(ids, id)
	}
	for _, id := range ids {
		info := b.waitRun(id, 10*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, "run %s: %+v", id, info.Nodes)
		require.Equal(t, int64(1), info.Nodes[0].Attempt, "run %s: delivered, claimed once", id)
	}
}
