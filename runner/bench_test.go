package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/tracing"
	"github.com/batonrun/baton/tracing/otelsdk"
)

// BenchmarkWorkerNoop is baton's end-to-end throughput: b.N one-node runs of
// a no-op kind, submitted while the queue is paused, then drained by one
// worker on a real redis-server; every node is claimed and committed under
// a fenced lease. It runs only with -bench:
//
//	go test -run '^$' -bench WorkerNoop -benchtime 20000x ./runner/
//
// cmd/bench compares the same drain with bare Asynq's.
func BenchmarkWorkerNoop(b *testing.B) { benchWorkerNoop(b) }

// BenchmarkWorkerNoopTraced is BenchmarkWorkerNoop with tracing on: the
// SDK exports every sampled span over OTLP/HTTP to a local endpoint that
// reads and drops them, sampling 10% and 100% of runs (parent-based, as
// the runner's default sampler follows the submitter's decision). Run it
// beside BenchmarkWorkerNoop to read the ratio, the machine's noise being
// what it is:
//
//	go test -run '^$' -bench 'WorkerNoop' -benchtime 20000x -count 3 ./runner/
func BenchmarkWorkerNoopTraced(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)
	for _, ratio := range []float64{0.1, 1} {
		b.Run(fmt.Sprintf("sampled=%g%%", ratio*100), func(b *testing.B) {
			exp, err := otelsdk.NewExporter(tracing.ExporterConfig{URL: sink.URL + "/v1/traces"})
			if err != nil {
				b.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
				sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
			tracing.Use(tp)
			b.Cleanup(func() {
				tracing.Use(nil)
				_ = tp.Shutdown(context.Background())
			})
			benchWorkerNoop(b)
		})
	}
}

func benchWorkerNoop(b *testing.B) {
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

	cpu0 := processCPU(b)
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
	// The worker's CPU per node (this process; Redis is another): steadier
	// than throughput on a shared machine, and what tracing would add to.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/node")
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

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
