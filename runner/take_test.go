package runner_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// A backlog of one-node runs drains like a chain: each commit takes the
// queue's next node of its shard for its handler, so few nodes go through
// Asynq's dequeue and a claim of their own. Every node still runs once,
// at epoch 1; Asynq's queue ends empty and counts every node processed;
// a delivery returns after at most 32 taken nodes.
func TestBusyWorkerTakesTheQueuesNextNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 40
	var ids []string
	for i := 0; len(ids) < n; i++ {
		id := "take" + strconv.Itoa(i)
		if fence.ShardOf(id) == fence.ShardOf("take0") {
			ids = append(ids, b.submit(fmt.Sprintf(`{"id":%q,"nodes":[{"id":"a","kind":"work"}]}`, id)))
		}
	}
	rec := newRecorder()
	m := runner.NewMetrics(nil)
	cfg := b.fastConfig("w1")
	cfg.Metrics, cfg.Concurrency = m, 1 // its one handler busy: it takes
	b.worker(cfg, map[string]runner.Kind{"work": rec})

	for _, id := range ids {
		info := b.waitRun(id, 15*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, id)
		require.Equal(t, int64(1), info.Nodes[0].Epoch, id)
		require.Equal(t, map[string]int{"a": 1}, countEvents(b.events(id), "committed"), id)
	}
	require.Equal(t, n, rec.count("a"), "every node ran once")
	claimed := counterValue(t, m.Claims.WithLabelValues("claimed"))
	taken := counterValue(t, m.Claims.WithLabelValues("taken"))
	require.Equal(t, float64(n), claimed+taken)
	require.GreaterOrEqual(t, taken, 32.0, "a delivery takes up to 32 nodes")
	require.GreaterOrEqual(t, claimed, 2.0, "then its handler returns, and Asynq delivers again")

	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	waitFor(t, 10*time.Second, "Asynq's queue empty, every node processed", func() bool {
		q, err := insp.GetQueueInfo("default")
		return err == nil && q.Size == 0 && q.Processed == n
	})
}

// A wide run's independent nodes are taken from the queue by one another's
// commits: they count as taken, not as continued, and a delivery takes at
// most 32 of them before Asynq chooses again.
func TestBusyWorkerTakesAWideRunsNextRoot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 40
	var nodes []string
	for i := range n {
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%d","kind":"work"}`, i))
	}
	id := b.submit(`{"id":"wide","nodes":[` + strings.Join(nodes, ",") + `]}`)
	rec := newRecorder()
	m := runner.NewMetrics(nil)
	cfg := b.fastConfig("w1")
	cfg.Metrics, cfg.Concurrency = m, 1
	b.worker(cfg, map[string]runner.Kind{"work": rec})

	info := b.waitRun(id, 15*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	for _, nd := range info.Nodes {
		require.Equal(t, int64(1), nd.Epoch, nd.ID)
	}
	claimed := counterValue(t, m.Claims.WithLabelValues("claimed"))
	taken := counterValue(t, m.Claims.WithLabelValues("taken"))
	require.Equal(t, float64(n), claimed+taken, "each node claimed once, by a delivery or by a commit's take")
	require.Zero(t, counterValue(t, m.Claims.WithLabelValues("continued")), "no node of this run is another's dependent")
	require.GreaterOrEqual(t, taken, 32.0)
	require.GreaterOrEqual(t, claimed, 2.0, "after 32 takes the handler returns, and Asynq delivers again")
}
