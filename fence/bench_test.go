package fence_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// The benchmarks run only with -bench, each on its own redis-server (they
// skip where redis-server is not installed):
//
//	go test -run '^$' -bench . -benchtime 2s ./fence/

// benchStore starts a redis-server for one benchmark and loads the scripts.
func benchStore(b *testing.B) *fence.Store {
	b.Helper()
	s := fence.New(redistest.Start(b).Client(b), nil)
	if err := s.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchRunSeq keeps run ids unique across a benchmark's invocations.
var benchRunSeq atomic.Int64

// benchRun is a run of independent no-op nodes, as runner.Client would
// submit it.
func benchRun(nodes int) fence.SubmitArgs {
	id := fmt.Sprintf("bench-%d", benchRunSeq.Add(1))
	a := fence.SubmitArgs{Run: id, Digest: id, Nodes: make([]fence.NodeSpec, nodes)}
	for i := range a.Nodes {
		a.Nodes[i] = fence.NodeSpec{ID: fmt.Sprintf("n%d", i), Kind: "noop", Queue: "default", Input: "null",
			Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 3}
	}
	return a
}

// benchSubmit stores n one-node runs from a few goroutines and returns
// their first nodes.
func benchSubmit(b *testing.B, s *fence.Store, n int) []fence.NodeRef {
	b.Helper()
	refs := make([]fence.NodeRef, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				a := benchRun(1)
				if _, err := s.Submit(context.Background(), a); err != nil {
					errs <- err
					return
				}
				refs[i] = fence.NodeRef{Thread: a.Run, Run: a.Run, Node: "n0"}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return refs
}

// BenchmarkClaimCommit is baton's fencing cost per node on the hot path: the
// claim and the commit of a one-node run (which also finishes the run), two
// round trips, one after the other.
func BenchmarkClaimCommit(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	refs := benchSubmit(b, s, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c, err := s.Claim(ctx, refs[i], "bench", time.Minute, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.Commit(ctx, c.Lease, []byte("{}"), c.Dependents)
		if err != nil {
			b.Fatal(err)
		}
		if res.RunStatus != "SUCCEEDED" {
			b.Fatalf("run %s after its only commit: %q, want SUCCEEDED", refs[i].Run, res.RunStatus)
		}
	}
}

// BenchmarkHeartbeatBatch renews a worker's leases in one pipeline; the
// per-lease metric shows what one more running node costs a tick.
func BenchmarkHeartbeatBatch(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	for _, leases := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("leases=%d", leases), func(b *testing.B) {
			a := benchRun(leases)
			if _, err := s.Submit(ctx, a); err != nil {
				b.Fatal(err)
			}
			beats := make([]fence.Beat, leases)
			for i, n := range a.Nodes {
				c, err := s.Claim(ctx, fence.NodeRef{Thread: a.Run, Run: a.Run, Node: n.ID}, "bench", time.Hour, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				beats[i] = fence.Beat{Lease: c.Lease, Progress: -1}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				_, errs := s.HeartbeatBatch(ctx, beats, time.Hour)
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*leases), "ns/lease")
		})
	}
}

// BenchmarkSweepIdle is a sweeper tick when nothing is due: one sweep.lua
// per shard, pipelined.
func BenchmarkSweepIdle(b *testing.B) {
	s := benchStore(b)
	benchSubmit(b, s, 100)
	o := fence.SweepOptions{Grace: time.Second, Threshold: time.Hour, Limit: 200, Retry: 5 * time.Second}
	for b.Loop() {
		if _, err := s.Sweep(context.Background(), o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRetainFinished is the retention sweep's own speed: callers
// (one per runner) calling RetainFinished one after another with no wait
// between calls, until b.N finished runs are retained. runs/s is the rate;
// redis-µs/run the scripts' Redis CPU per run; scripts/run the script
// calls per retained run, above 1 where callers retained the same run (the
// losers' calls change nothing). Runs of several nodes and runs of threads
// are retained only this way, so this bounds how many of them a fleet may
// end a second.
func BenchmarkRetainFinished(b *testing.B) {
	for _, callers := range []int{1, 2} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			rdb := redistest.Start(b).Client(b)
			s := fence.New(rdb, nil) // no RunRetention: every run goes to the finished index
			ctx := context.Background()
			if err := s.Load(ctx); err != nil {
				b.Fatal(err)
			}
			for _, ref := range benchSubmit(b, s, b.N) {
				c, err := s.Claim(ctx, ref, "bench", time.Minute, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Commit(ctx, c.Lease, []byte("{}"), c.Dependents); err != nil {
					b.Fatal(err)
				}
			}
			usec, calls := redisScriptStats(b, rdb)
			b.ResetTimer()
			var retained atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for retained.Load() < int64(b.N) {
						n, err := s.RetainFinished(ctx, time.Hour, 16)
						if err != nil {
							errs <- err
							return
						}
						retained.Add(int64(n))
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			usec2, calls2 := redisScriptStats(b, rdb)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			b.ReportMetric((usec2-usec)/float64(b.N), "redis-µs/run")
			b.ReportMetric((calls2-calls)/float64(b.N), "scripts/run")
		})
	}
}
