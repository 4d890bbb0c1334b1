package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
)

// scenario is one system in one shape, driven through a measurement by
// bench.measure: start, warm up, pause, fill, drain, verify, stop.
type scenario interface {
	system() string // "asynq" or "baton"
	mode() string   // "flat", "single", "wide k=10", "chain k=10"
	// start brings the server (worker) up.
	start(ctx context.Context) error
	// fill enqueues tasks (submits runs) named by tag: at least n nodes.
	// It returns how many nodes will run.
	fill(ctx context.Context, tag string, n int) (int, error)
	// settled reports whether the work the system does after a node's
	// end is done too (baton: every finished run retained; Asynq deletes a
	// finished task in the same script that marks it done).
	settled(ctx context.Context) (bool, error)
	// verify checks that the work tagged tag ran, each node exactly once.
	verify(ctx context.Context, tag string, nodes int) error
	stop()
	progress() *progress
}

// progress is what the handlers report.
type progress struct {
	done  atomic.Int64 // handlers (kinds) that ran to the end
	first atomic.Int64 // unix nanos of the first delivery since reset; 0: none
}

func (p *progress) reset() {
	p.done.Store(0)
	p.first.Store(0)
}

// delivered marks a handler's start.
func (p *progress) delivered() {
	if p.first.Load() == 0 {
		p.first.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// result is one measurement.
type result struct {
	system, mode string
	nodes        int
	submit       time.Duration // enqueueing (submitting) every node, queue paused
	drain        time.Duration // first delivery to the last task's end, and every run retained
	submitRT     counts        // client-side, submit phase
	drainRT      counts        // client-side, drain phase
	server       serverStats   // Redis's own, drain phase
	proc         time.Duration // this process's CPU, drain phase
	steal        float64       // share of the machine's CPU time the host took (steal), drain phase; -1: unknown
	busy         float64       // share of the machine's CPU time in use (every process), drain phase; -1: unknown
	// memPerNode is Redis's used_memory after the drain less before the
	// submit, per node: what the system keeps of finished work. NaN:
	// unknown (a cluster).
	memPerNode float64
	// child: the system ran in a process of its own (BullMQ's node): its
	// round trips were not counted, proc is that process's CPU.
	child bool
}

func (r result) drainRate() float64  { return float64(r.nodes) / r.drain.Seconds() }
func (r result) submitRate() float64 { return float64(r.nodes) / r.submit.Seconds() }

// cpuPerNode is the CPU time, µs, Redis and this process spent per node in
// the drain: on one machine, about all the work a node costs it.
func (r result) cpuPerNode() float64 { return us(r.server.cpu+r.proc) / float64(r.nodes) }

// cores is the CPU the system got in the drain, Redis's and the worker
// process's: on a host others keep busy, the share of the machine it was
// given.
func (r result) cores() float64 { return r.cpuPerNode() * r.drainRate() / 1e6 }

// bench runs measurements against one target.
type bench struct {
	o       options
	t       *target
	log     *slog.Logger    // the worker's
	profile map[string]bool // scenarios already profiled
	counted *ownRedis       // with -callgrind: the server whose instructions the scripts section counts
}

// measure runs one measurement of sc on an empty database.
func (b *bench) measure(ctx context.Context, sc scenario, round int) (res result, err error) {
	res = result{system: sc.system(), mode: sc.mode()}
	if err := b.t.flush(ctx); err != nil {
		return res, err
	}
	if err := sc.start(ctx); err != nil {
		return res, fmt.Errorf("start %s: %w", sc.system(), err)
	}
	defer sc.stop()
	p := sc.progress()
	if b.o.warmup > 0 {
		tag := fmt.Sprintf("w%d", round)
		n, err := sc.fill(ctx, tag, b.o.warmup)
		if err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		if _, err := b.drained(ctx, p, n, sc.settled); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
		if err := sc.verify(ctx, tag, n); err != nil {
			return res, fmt.Errorf("warm-up: %w", err)
		}
	}

	insp := asynq.NewInspectorFromRedisClient(b.t.raw)
	defer insp.Close()
	for _, q := range b.t.queues {
		if err := insp.PauseQueue(q); err != nil {
			return res, fmt.Errorf("pause queue %s: %w", q, err)
		}
	}
	p.reset()
	tag := fmt.Sprintf("m%d", round)
	m0, err := b.usedMemory(ctx)
	if err != nil {
		return res, err
	}
	c0 := b.t.count.snapshot()
	start := time.Now()
	res.nodes, err = sc.fill(ctx, tag, b.o.n)
	res.submit = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("submit: %w", err)
	}
	c1 := b.t.count.snapshot()
	s1, err := b.t.serverStats(ctx)
	if err != nil {
		return res, err
	}
	cpu1, host1 := procCPU(), readHostCPU()
	stopProfile, err := b.startProfile(sc)
	if err != nil {
		return res, err
	}
	for _, q := range b.t.queues {
		if err := insp.UnpauseQueue(q); err != nil {
			stopProfile()
			return res, fmt.Errorf("unpause queue %s: %w", q, err)
		}
	}
	end, err := b.drained(ctx, p, res.nodes, sc.settled)
	stopProfile()
	if err != nil {
		return res, fmt.Errorf("drain: %w", err)
	}
	res.proc = procCPU() - cpu1
	host2 := readHostCPU()
	res.steal, res.busy = host2.stealSince(host1), host2.busySince(host1)
	c2 := b.t.count.snapshot()
	s2, err := b.t.serverStats(ctx)
	if err != nil {
		return res, err
	}
	m1, err := b.usedMemory(ctx)
	if err != nil {
		return res, err
	}
	res.memPerNode = (m1 - m0) / float64(res.nodes)
	res.drain = end.Sub(time.Unix(0, p.first.Load()))
	res.submitRT, res.drainRT = c1.since(c0), c2.since(c1)
	res.server = s2.since(s1)
	if err := sc.verify(ctx, tag, res.nodes); err != nil {
		return res, err
	}
	return res, nil
}

// usedMemory is the target's used_memory, or NaN on a cluster (whose
// masters each hold part of it).
func (b *bench) usedMemory(ctx context.Context) (float64, error) {
	if b.t.cluster != nil {
		return math.NaN(), nil
	}
	m, err := b.t.usedMemory(ctx)
	return float64(m), err
}

// drained waits until nodes handlers have finished, the queue holds
// nothing and settled (when not nil) says so, and returns when that was
// seen.
func (b *bench) drained(ctx context.Context, p *progress, nodes int, settled func(context.Context) (bool, error)) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	defer cancel()
	tick := time.NewTicker(time.Millisecond) // polls a local counter; Redis only at the end
	defer tick.Stop()
	for {
		if p.done.Load() >= int64(nodes) {
			empty, err := b.t.queueEmpty(ctx)
			if err != nil {
				return time.Time{}, err
			}
			if empty {
				done := true
				if settled != nil {
					if done, err = settled(ctx); err != nil {
						return time.Time{}, err
					}
				}
				if done {
					return time.Now(), nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%d of %d done after %s: %w", p.done.Load(), nodes, b.o.timeout, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// startProfile profiles the drain of sc's first measurement when
// -cpuprofile is set.
func (b *bench) startProfile(sc scenario) (stop func(), err error) {
	name := sc.system() + "-" + firstWord(sc.mode())
	if b.o.cpuProfile == "" || b.profile[name] {
		return func() {}, nil
	}
	b.profile[name] = true
	if err := os.MkdirAll(b.o.cpuProfile, 0o755); err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	f, err := os.Create(filepath.Join(b.o.cpuProfile, name+".pprof"))
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func firstWord(s string) string {
	w, _, _ := strings.Cut(s, " ")
	return w
}

// procCPU is the CPU time this process has used.
func procCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hostCPU is the machine's CPU time in clock ticks, from /proc/stat's
// "cpu" line: all of it, what no process used (idle, waiting for I/O), and
// what the hypervisor gave other guests while this one wanted to run
// (steal). A drain during which the host steals a large share ran on a
// machine slower than its figures say, by an amount that differs from one
// system's round to the other's. A drain that keeps every core busy is
// bound by the CPU each node costs, not by a round trip.
type hostCPU struct{ total, idle, steal uint64 }

// readHostCPU reads it; the zero value off Linux.
func readHostCPU() hostCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return hostCPU{}
	}
	var h hostCPU
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return hostCPU{}
		}
		if i < 8 { // user … steal; guest time is counted in user already
			h.total += n
		}
		switch i {
		case 3, 4: // idle, iowait
			h.idle += n
		case 7:
			h.steal = n
		}
	}
	return h
}

// stealSince is the share of CPU time stolen since h0, or -1 when unknown.
func (h hostCPU) stealSince(h0 hostCPU) float64 {
	if h.total <= h0.total || h0.total == 0 {
		return -1
	}
	return float64(h.steal-h0.steal) / float64(h.total-h0.total)
}

// busySince is the share of CPU time some process ran since h0 (neither
// idle nor stolen), or -1 when unknown.
func (h hostCPU) busySince(h0 hostCPU) float64 {
	if h.total <= h0.total || h0.total == 0 {
		return -1
	}
	d := h.total - h0.total
	return float64(d-(h.idle-h0.idle)-(h.steal-h0.steal)) / float64(d)
}

// parallel calls fn(i) for i in [0, count) from workers goroutines and
// returns the first error.
func parallel(ctx context.Context, count, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, count) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= count {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx) // nil unless fn or the caller stopped it
}
