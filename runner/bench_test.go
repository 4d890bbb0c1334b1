package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// BenchmarkWorkerNoop is baton's end-to-end throughput: b.N one-node runs of
// a no-op kind, submitted while the queue is paused, then drained by one
// worker on a real redis-server; every node is claimed and committed under
// a fenced lease. It runs only with -bench:
//
//	go test -run '^$' -bench WorkerNoop -benchtime 20000x ./runner/
//
// cmd/bench compares the same drain with bare Asynq's.
func BenchmarkWorkerNoop(b *testing.B) {
	rdb := redistest.Start(b).Client(b)
	ctx := context.Background()
	client, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })

	var done atomic.Int64
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, ID: "bench", Concurrency: 16,
		PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	w.Register("noop", runner.KindFunc(func(context.Context, *runner.Task) (json.RawMessage, error) {
		done.Add(1)
		return json.RawMessage("{}"), nil
	}))
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Shutdown)

	insp := asynq.NewInspectorFromRedisClient(rdb)
	b.Cleanup(func() { _ = insp.Close() })
	if err := insp.PauseQueue(runner.DefaultQueue); err != nil {
		b.Fatal(err)
	}
	benchSubmitRuns(b, client, b.N)

	b.ResetTimer()
	if err := insp.UnpauseQueue(runner.DefaultQueue); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute + time.Duration(b.N)*time.Millisecond)
	for {
		if done.Load() >= int64(b.N) {
			// The handler commits, then Asynq marks the task done.
			q, err := insp.GetQueueInfo(runner.DefaultQueue)
			if err != nil {
				b.Fatal(err)
			}
			if q.Pending+q.Active+q.Retry+q.Scheduled == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes ran", done.Load(), b.N)
		}
		time.Sleep(time.Millisecond) // polling a local counter; Redis only at the end
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
	if got := done.Load(); got != int64(b.N) {
		b.Fatalf("%d nodes ran, want %d (each once)", got, b.N)
	}
}

// benchSubmitRuns submits n one-node runs from a few goroutines.
func benchSubmitRuns(b *testing.B, c *runner.Client, n int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				spec := &runner.RunSpec{ID: fmt.Sprintf("bench-%06d", i), Nodes: []runner.NodeSpec{{ID: "n0", Kind: "noop"}}}
				if _, err := c.Submit(context.Background(), spec); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
