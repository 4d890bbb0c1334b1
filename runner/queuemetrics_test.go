package runner_test

import (
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// A scrape reads the served queues' depth from Redis: tasks waiting in a
// queue no worker takes are counted as pending, with the oldest one's wait;
// a queue Asynq has not seen yet reads as empty.
func TestQueueCollectorReportsDepth(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	cli := asynq.NewClientFromRedisClient(rdb)
	for range 3 {
		_, err := cli.Enqueue(asynq.NewTask("x", nil), asynq.Queue("waiting"))
		require.NoError(t, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(runner.NewQueueCollector(rdb, []string{"waiting", "unseen"}))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	require.Equal(t, 3.0, got["baton_queue_tasks,waiting,pending"])
	require.Equal(t, 0.0, got["baton_queue_tasks,waiting,active"])
	require.GreaterOrEqual(t, got["baton_queue_latency_seconds,waiting"], 0.0)
	require.Contains(t, got, "baton_queue_tasks,unseen,pending")
	require.Equal(t, 0.0, got["baton_queue_tasks,unseen,pending"])
}
