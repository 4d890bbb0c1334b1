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
