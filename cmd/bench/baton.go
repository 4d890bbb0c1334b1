package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/tracing"
	"github.com/batonrun/baton/tracing/otelsdk"
)

// batonScenario is one runner.Worker running no-op nodes: every node is
// claimed under a fenced lease and committed by the scripts, as in
// production.
type batonScenario struct {
	o     options
	t     *target
	log   *slog.Logger
	shape string // single, thread, wide or chain
	// limited: every node names benchLimits (set by start), which never
	// throttle: the row measures what taking and freeing them costs.
	limited bool
	// dispatchers is WorkerConfig.Dispatchers; 0: its default.
	dispatchers int
	w           *runner.Worker
	cli         *runner.Client
	p           progress
	// traced: tracing on for this row, sampling runs at sample, spans
	// exported over OTLP/HTTP to sink, which drops them.
	traced bool
	sample float64
	tp     *sdktrace.TracerProvider
	sink   *httptest.Server
}

func (s *batonScenario) system() string { return "baton" }

func (s *batonScenario) mode() string {
	m := s.shape
	if s.size() > 1 {
		m = fmt.Sprintf("%s k=%d", s.shape, s.o.k)
	}
	if len(s.o.dispatchers) > 1 || s.dispatchers != 0 {
		m += fmt.Sprintf(" d=%d", cmp.Or(s.dispatchers, runner.DefaultDispatchers))
	}
	if s.traced {
		m += fmt.Sprintf(" traced=%g%%", s.sample*100)
	}
	if s.limited {
		m += " limits"
	}
	return m
}

func (s *batonScenario) progress() *progress { return &s.p }

// settled reports whether every finished run was retained (a one-node run
// is retained by its commit; others wait on their shard's finished index
// for the worker's retention sweep, as do the locators of runs of a
// thread). Once the nodes have ended it retains what is left itself, as
// the sweep would at its next tick: the window then holds retention's
// work, not the sweep's idle wait. A call that retains no run and leaves
// nothing behind has emptied the indexes.
func (s *batonScenario) settled(ctx context.Context) (bool, error) {
	r, err := s.cli.Store().RetainBatch(ctx, runner.DefaultRetention, 64)
	return err == nil && r.Runs == 0 && !r.Behind, err
}

func (s *batonScenario) size() int {
	if s.shape == "single" || s.shape == "thread" {
		return 1
	}
	return s.o.k
}

func (s *batonScenario) start(ctx context.Context) error {
	s.p.reset()
	if s.traced {
		if err := s.startTracing(ctx); err != nil {
			return err
		}
	}
	var err error
	if s.cli, err = runner.NewClient(runner.ClientConfig{Redis: s.t.rdb}); err != nil {
		return err
	}
	if s.limited { // after the measurement's FLUSHDB
		if err := setBenchLimits(ctx, s.cli, s.o); err != nil {
			_ = s.cli.Close()
			return err
		}
	}
	s.w, err = runner.NewWorker(runner.WorkerConfig{
		Redis:          s.t.rdb,
		ID:             "bench-worker",
		Concurrency:    s.o.concurrency,
		Dispatchers:    s.dispatchers,
		Queues:         weights(s.t.queues),
		PollInterval:   s.o.poll,
		ReadyThreshold: s.o.readyAfter,
		NoTake:         s.o.noTake,
		Logger:         s.log,
	})
	if err != nil {
		_ = s.cli.Close()
		return err
	}
	s.w.Register("noop", runner.KindFunc(s.noop))
	if err := s.w.Start(ctx); err != nil {
		_ = s.cli.Close()
		return err
	}
	return nil
}

func (s *batonScenario) stop() {
	s.w.Shutdown()
	_ = s.cli.Close()
	if s.tp != nil {
		tracing.Use(nil)
		_ = s.tp.Shutdown(context.Background())
		s.sink.Close()
		s.tp, s.sink = nil, nil
	}
}

// startTracing turns tracing on for this row: the submits' and the
// worker's spans go, at s.sample (parent-based, as the runner's default
// sampler), through the SDK's batch processor and OTLP/HTTP exporter (otelsdk.Exporter) to a
// local endpoint that reads and drops them, so the row pays what an
// exporting runner pays.
func (s *batonScenario) startTracing(ctx context.Context) error {
	s.sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	exp, err := otelsdk.NewExporter(tracing.ExporterConfig{URL: s.sink.URL + "/v1/traces"})
	if err != nil {
		s.sink.Close()
		return fmt.Errorf("tracing: %w", err)
	}
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.sample))))
	tracing.Use(s.tp)
	return nil
}

func (s *batonScenario) noop(_ context.Context, _ *runner.Task) (json.RawMessage, error) {
	s.p.delivered()
	s.p.done.Add(1)
	return json.RawMessage("{}"), nil
}

func runID(tag string, i int) string { return fmt.Sprintf("%s-%06d", tag, i) }

// thread is run id's thread: one of its own in the thread shape, none
// otherwise.
func (s *batonScenario) thread(id string) string {
	if s.shape == "thread" {
		return "t-" + id
	}
	return ""
}

// spec is run i of the measurement tagged tag.
func (s *batonScenario) spec(tag string, i int) *runner.RunSpec {
	spec := &runner.RunSpec{ID: runID(tag, i), Thread: s.thread(runID(tag, i)), Nodes: make([]runner.NodeSpec, s.size())}
	for j := range spec.Nodes {
		spec.Nodes[j] = runner.NodeSpec{ID: fmt.Sprintf("n%d", j), Kind: "noop"}
		if q := s.t.queues[i%len(s.t.queues)]; q != queue {
			spec.Nodes[j].Queue = q
		}
		if s.shape == "chain" && j > 0 {
			spec.Nodes[j].Deps = []string{fmt.Sprintf("n%d", j-1)}
		}
		if s.limited {
			spec.Nodes[j].Limits = benchLimitUses
		}
	}
	return spec
}

// fill submits n/size runs (rounded up).
func (s *batonScenario) fill(ctx context.Context, tag string, n int) (int, error) {
	runs := (n + s.size() - 1) / s.size()
	err := parallel(ctx, runs, s.o.submitters, func(ctx context.Context, i int) error {
		_, err := s.cli.Submit(ctx, s.spec(tag, i))
		return err
	})
	return runs * s.size(), err
}

// verify checks that every node ran once and every run SUCCEEDED.
func (s *batonScenario) verify(ctx context.Context, tag string, nodes int) error {
	if got := s.p.done.Load(); got != int64(nodes) {
		return fmt.Errorf("baton %s %s: %d nodes ran, want %d", s.mode(), tag, got, nodes)
	}
	runs := nodes / s.size()
	const batch = 1000
	for lo := 0; lo < runs; lo += batch {
		ids := make([]string, 0, batch)
		for i := lo; i < min(lo+batch, runs); i++ {
			ids = append(ids, runID(tag, i))
		}
		// Through the store: a finished run may be packed into one key.
		sums, err := s.cli.Store().Summaries(ctx, ids)
		if err != nil {
			return fmt.Errorf("verify %s: %w", tag, err)
		}
		if len(sums) != len(ids) {
			return fmt.Errorf("baton %s: %d of runs %s.. found, want %d", s.mode(), len(sums), ids[0], len(ids))
		}
		for _, sum := range sums {
			if sum.Status != "SUCCEEDED" {
				return fmt.Errorf("baton %s: run %s is %q, want SUCCEEDED", s.mode(), sum.ID, sum.Status)
			}
		}
	}
	return nil
}
