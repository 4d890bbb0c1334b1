package runner

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// A held commit whose acknowledgement never comes is sent alone by its
// timer; one that is taken is sent by whoever took it, once; a second
// commit for the same task is not held.
func TestHeldCommitGoesAloneWithoutAnAcknowledgement(t *testing.T) {
	t.Parallel()
	a := newAcks(20 * time.Millisecond)
	sent := make(chan redis.Scripter, 1)
	require.True(t, a.hold("task-1", func(via redis.Scripter) { sent <- via }))
	require.False(t, a.hold("task-1", func(redis.Scripter) { t.Error("a second commit for task-1 was held") }))
	select {
	case via := <-sent:
		require.Nil(t, via, "sent alone")
	case <-time.After(5 * time.Second):
		t.Fatal("the held commit was never sent")
	}
	require.Nil(t, a.take("task-1", nil), "sent once")

	require.True(t, a.hold("task-2", func(redis.Scripter) {}))
	require.True(t, a.hold("task-3", func(redis.Scripter) {}))
	h := a.take("task-2", nil)
	require.NotNil(t, h)
	require.Equal(t, 1, a.dropAll(), "task-3 dropped, as by a crash")
}

// A node's result whose commit waits for an acknowledgement that never
// comes (Asynq lost its lease on the task) is still committed before
// Shutdown returns: the worker stops only once the commit's timer has
// sent it, so the node ends SUCCEEDED under this worker, not by lease
// expiry under another.
func TestShutdownWaitsForAHeldCommit(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	const after = 400 * time.Millisecond
	w, err := NewWorker(WorkerConfig{Redis: rdb, ID: "w1", Concurrency: 1,
		LeaseTTL: 4 * after, HeartbeatInterval: after, ShutdownTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	require.Equal(t, after, w.acks.after)

	// The node is stored, not enqueued: no delivery, no acknowledgement.
	_, err = w.store.Submit(ctx, fence.SubmitArgs{Run: "held", Digest: "d", Nodes: []fence.NodeSpec{{ID: "a",
		Kind: "k", Queue: "default", Input: "null", Deps: []string{}, Dependents: []string{},
		Descendants: []string{}, MaxAttempts: 1}}})
	require.NoError(t, err)
	c, err := w.store.Claim(ctx, fence.NodeRef{Thread: "held", Run: "held", Node: "a"}, "w1", 4*after, time.Second)
	require.NoError(t, err)
	require.True(t, w.holdCommit(ctx, "task-never-acknowledged", w.log, c, json.RawMessage(`{"v":1}`), fence.Spend{}))

	begin := time.Now()
	w.Shutdown()
	require.GreaterOrEqual(t, time.Since(begin), after-50*time.Millisecond, "Shutdown returned before the held commit's timer")
	run, err := w.store.GetRun(context.Background(), "held")
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", run.Status, "the held commit went before Shutdown returned")
	require.Equal(t, "w1", run.Nodes[0].Owner)
	require.JSONEq(t, `{"v":1}`, string(run.Nodes[0].Result))
	var alone dto.Metric
	require.NoError(t, w.m.CommitsAlone.Write(&alone))
	require.Equal(t, 1.0, alone.GetCounter().GetValue(), "counted as a commit sent without its acknowledgement")
}
