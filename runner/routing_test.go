package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// stockWorker starts a worker with the stock kinds only (exec, http, noop,
// sleep), as bin/runner has.
func (b *testBundle) stockWorker(cfg runner.WorkerConfig) *runner.Worker {
	b.t.Helper()
	w, err := runner.NewWorker(cfg)
	require.NoError(b.t, err)
	kinds.RegisterStock(w)
	require.NoError(b.t, w.Start(context.Background()))
	b.t.Cleanup(w.Shutdown)
	return w
}

func summarize() runner.Kind {
	return runner.KindFunc(func(_ context.Context, t *runner.Task) (json.RawMessage, error) {
		return json.RawMessage(`{"summary":"` + t.Lease.Owner + `"}`), nil
	})
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, g.Write(&m))
	return m.GetGauge().GetValue()
}

// A mixed fleet on one Redis: one program runs the custom kind summarize
// beside the stock kinds, two stock runners do not have it. Every run
// succeeds, each node in one attempt: a stock runner refuses the claim
// (counted) and the delivery reaches the capable worker.
func TestMixedFleetRoutesACustomKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	custom := b.fastConfig("custom")
	custom.Metrics = runner.NewMetrics(nil)
	w, err := runner.NewWorker(custom)
	require.NoError(t, err)
	kinds.RegisterStock(w)
	w.Register("summarize", summarize())
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)
	stock := make([]*runner.Metrics, 2)
	for i := range stock {
		cfg := b.fastConfig(fmt.Sprintf("stock%d", i))
		stock[i] = runner.NewMetrics(nil)
		cfg.Metrics = stock[i]
		b.stockWorker(cfg)
	}

	var ids []string
	for i := range 50 {
		s, err := runner.ParseSpec([]byte(fmt.Sprintf(`{"id":"mixed-%d","nodes":[
			{"id":"fetch","kind":"noop"},
			{"id":"sum","kind":"summarize","deps":["fetch"],"max_attempts":1},
			{"id":"after","kind":"noop","deps":["sum"]}]}`, i)))
		require.NoError(t, err)
		res, err := b.client.Submit(context.Background(), s)
		require.NoError(t, err)
		require.Empty(t, res.Warnings, "the custom worker serves summarize")
		ids = append(ids, res.RunID)
	}
	for _, id := range ids {
		info := b.waitRun(id, 60*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, "run %s: %+v", id, info.Nodes)
		for _, n := range info.Nodes {
			require.Equal(t, int64(1), n.Attempt, "%s/%s ran in one attempt", id, n.ID)
			if n.ID == "sum" {
				require.JSONEq(t, `{"summary":"custom"}`, string(n.Result))
			}
		}
	}
	var refused float64
	for _, m := range stock {
		refused += counterValue(t, m.Claims.WithLabelValues("wrong_kind"))
		require.Zero(t, counterValue(t, m.Failures.WithLabelValues("failed")), "a stock runner failed nothing")
		require.Zero(t, counterValue(t, m.Failures.WithLabelValues("retry")))
	}
	// Deliveries of sum that reached a stock runner were refused and went
	// back to the queue; with a delay that grows with the node's wait, a
	// node is refused a few times, not in a loop.
	t.Logf("claims refused by stock runners: %v for 50 summarize nodes", refused)
	require.Less(t, refused, float64(50*10), "no busy loop between incapable workers")
	require.Zero(t, counterValue(t, custom.Metrics.Claims.WithLabelValues("wrong_kind")))
}

// syncBuffer is a log sink tests read while workers write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.buf.String(), sub)
}

// A node of a kind no runner serves is accepted with a warning, waits
// READY, is reported unserved (status, metric, one log line), and runs as
// soon as a runner that serves it starts.
func TestUnservedNodeWaitsAndRunsWhenARunnerStarts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	logs := &syncBuffer{}
	ms := []*runner.Metrics{runner.NewMetrics(nil), runner.NewMetrics(nil)}
	for i, m := range ms {
		cfg := b.fastConfig(fmt.Sprintf("stock%d", i))
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		cfg.Metrics = m
		b.stockWorker(cfg)
	}
	live, err := b.client.Workers(context.Background())
	require.NoError(t, err)
	require.Len(t, live, 2)
	require.Equal(t, []string{"exec", "http", "noop", "sleep"}, live[0].Kinds)
	require.Equal(t, []string{"default"}, live[0].Queues)

	s, err := runner.ParseSpec([]byte(`{"id":"unserved","nodes":[{"id":"sum","kind":"summarize","max_attempts":1}]}`))
	require.NoError(t, err)
	res, err := b.client.Submit(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, []string{"no runner serves kind summarize on queue default"}, res.Warnings)

	// A sweeper finds it (after the READY threshold): the gauge and one
	// warning.
	waitFor(t, 20*time.Second, "the node to be reported unserved", func() bool {
		return gaugeValue(t, ms[0].NodesUnserved)+gaugeValue(t, ms[1].NodesUnserved) == 1
	})
	require.Equal(t, 1, logs.count("node_unserved"))
	info, err := b.client.Status(context.Background(), "unserved")
	require.NoError(t, err)
	n := info.Nodes[0]
	require.Equal(t, "READY", n.State)
	require.Zero(t, n.Attempt, "refused claims count no attempt")
	require.Equal(t, "waiting: no runner serves kind summarize on queue default", n.Waiting)

	capable := b.fastConfig("custom")
	w, err := runner.NewWorker(capable)
	require.NoError(t, err)
	w.Register("summarize", summarize())
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)
	info = b.waitRun("unserved", 20*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Equal(t, int64(1), info.Nodes[0].Attempt)
	require.Empty(t, info.Nodes[0].Waiting)
	require.Equal(t, 1, logs.count("node_unserved"), "one warning per node, not per retry or per runner")
	waitFor(t, 15*time.Second, "the gauge to forget the node", func() bool {
		return gaugeValue(t, ms[0].NodesUnserved)+gaugeValue(t, ms[1].NodesUnserved) == 0
	})
}
