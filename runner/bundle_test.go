package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// testBundle is one real redis-server, a client, and the workers a test
// starts on it.
type testBundle struct {
	t      *testing.T
	srv    *redistest.Server
	rdb    redis.UniversalClient
	client *runner.Client
	log    *slog.Logger
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return &testBundle{t: t, srv: srv, rdb: rdb, client: c,
		log: slog.New(slog.NewTextHandler(logOut(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// fastConfig has leases short enough for tests to watch them expire.
func (b *testBundle) fastConfig(id string) runner.WorkerConfig {
	return runner.WorkerConfig{
		Redis: b.rdb, ID: id, Concurrency: 8,
		LeaseTTL: 900 * time.Millisecond, HeartbeatInterval: 150 * time.Millisecond,
		Grace: 100 * time.Millisecond, SweepInterval: 100 * time.Millisecond,
		ReadyThreshold: 2 * time.Second, ShutdownTimeout: 5 * time.Second,
		PollInterval: 10 * time.Millisecond, RetryBase: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Logger: b.log,
	}
}

// worker starts a worker with kinds registered; it is shut down when the
// test ends.
func (b *testBundle) worker(cfg runner.WorkerConfig, kinds map[string]runner.Kind) *runner.Worker {
	b.t.Helper()
	w, err := runner.NewWorker(cfg)
	require.NoError(b.t, err)
	for name, k := range kinds {
		w.Register(name, k)
	}
	require.NoError(b.t, w.Start(context.Background()))
	b.t.Cleanup(w.Shutdown)
	return w
}

func (b *testBundle) submit(spec string) string {
	b.t.Helper()
	s, err := runner.ParseSpec([]byte(spec))
	require.NoError(b.t, err)
	res, err := b.client.Submit(context.Background(), s)
	require.NoError(b.t, err)
	return res.RunID
}

// waitRun polls the run until it is terminal.
func (b *testBundle) waitRun(id string, timeout time.Duration) *fence.RunInfo {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info, err := b.client.Status(context.Background(), id)
		require.NoError(b.t, err)
		switch info.Status {
		case "SUCCEEDED", "FAILED", "CANCELLED":
			return info
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("run %s still %s after %s: %+v", id, info.Status, timeout, info.Nodes)
		}
		time.Sleep(20 * time.Millisecond) // polling the store for the outcome under test
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // polling the condition under test
	}
}

func (b *testBundle) events(id string) []fence.Event {
	b.t.Helper()
	ev, err := b.client.Events(context.Background(), id, "", 0)
	require.NoError(b.t, err)
	return ev
}

func countEvents(evs []fence.Event, typ string) map[string]int {
	out := map[string]int{}
	for _, e := range evs {
		if e.Type == typ {
			out[e.Node]++
		}
	}
	return out
}

// recorder is a kind that records every execution.
type recorder struct {
	mu    sync.Mutex
	runs  map[string][]string // node -> owners that ran it
	block func(ctx context.Context, t *runner.Task) error
}

func newRecorder() *recorder { return &recorder{runs: map[string][]string{}} }

func (r *recorder) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	r.mu.Lock()
	r.runs[t.Lease.Node] = append(r.runs[t.Lease.Node], t.Lease.Owner)
	block := r.block
	r.mu.Unlock()
	if block != nil {
		if err := block(ctx, t); err != nil {
			return nil, err
		}
	}
	return json.RawMessage(fmt.Sprintf(`{"node":%q,"by":%q,"epoch":%d}`, t.Lease.Node, t.Lease.Owner, t.Lease.Epoch)), nil
}

func (r *recorder) count(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs[node])
}

func logOut() io.Writer {
	if os.Getenv("BATON_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// recv receives from ch or fails the test after timeout.
func recv[T any](t *testing.T, ch <-chan T, timeout time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("nothing received after %s", timeout)
		panic("unreachable")
	}
}
