package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/batonrun/baton/runner"
)

// takeover kills a worker in the middle of a node (runner.Worker.Kill:
// heartbeats stop and nothing is released or written, as after SIGKILL)
// and measures how long until a second worker's handler runs the node
// again. Expected: about LeaseTTL + Grace + SweepInterval after the last
// heartbeat, i.e. between TTL - TTL/3 and TTL after the kill, plus grace
// and up to a sweep interval.
func (b *bench) takeover(ctx context.Context, out io.Writer, rep report) error {
	var lat []time.Duration
	for i := range b.o.takeovers {
		d, err := b.oneTakeover(ctx, i)
		if err != nil {
			return err
		}
		lat = append(lat, d)
	}
	slices.Sort(lat)
	fmt.Fprintf(out, "\ntakeover after kill (lease %s, grace 1s, sweep 1s): n=%d  p50 %s  max %s\n",
		b.o.takeoverTTL, len(lat), ms(quantile(lat, 0.5)), ms(lat[len(lat)-1]))
	fmt.Fprintln(out, `takeover   a worker running a node is killed (runner.Worker.Kill: no heartbeat, no release,
           as after SIGKILL); time from the kill to another worker's handler starting the node`)
	rep["takeover"] = map[string]any{"lease_ttl_ms": msf(b.o.takeoverTTL), "n": len(lat),
		"p50_ms": msf(quantile(lat, 0.5)), "max_ms": msf(lat[len(lat)-1])}
	return nil
}

func (b *bench) oneTakeover(ctx context.Context, i int) (time.Duration, error) {
	if err := b.t.flush(ctx); err != nil {
		return 0, err
	}
	cli, err := runner.NewClient(runner.ClientConfig{Redis: b.t.rdb})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	first, second := make(chan struct{}, 1), make(chan struct{}, 1)
	mk := func(id string, started chan struct{}) (*runner.Worker, error) {
		w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.t.rdb, ID: id, Concurrency: 4,
			LeaseTTL: b.o.takeoverTTL, Logger: b.log})
		if err != nil {
			return nil, err
		}
		w.Register("hold", runner.KindFunc(func(ctx context.Context, _ *runner.Task) (json.RawMessage, error) {
			started <- struct{}{}
			if id == "bench-victim" {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			}
			return json.RawMessage("{}"), nil
		}))
		return w, w.Start(ctx)
	}
	victim, err := mk("bench-victim", first)
	if err != nil {
		return 0, err
	}
	id := fmt.Sprintf("takeover-%d", i)
	if _, err := cli.Submit(ctx, &runner.RunSpec{ID: id, Nodes: []runner.NodeSpec{{ID: "n", Kind: "hold"}}}); err != nil {
		victim.Kill()
		return 0, err
	}
	select {
	case <-first:
	case <-time.After(b.o.timeout):
		victim.Kill()
		return 0, fmt.Errorf("node never started")
	}
	heir, err := mk("bench-heir", second)
	if err != nil {
		victim.Kill()
		return 0, err
	}
	defer heir.Shutdown()
	t0 := time.Now()
	go victim.Kill() // Kill waits for the Asynq server to stop
	select {
	case <-second:
		return time.Since(t0), nil
	case <-time.After(b.o.timeout):
		return 0, fmt.Errorf("no takeover within %s", b.o.timeout)
	}
}

// heartbeat runs -hb-nodes long-running nodes on one worker and counts the
// heartbeat round trips per tick (a pipeline is one) over five ticks.
func (b *bench) heartbeat(ctx context.Context, out io.Writer, rep report) error {
	if err := b.t.flush(ctx); err != nil {
		return err
	}
	const ttl, interval, ticks = 3 * time.Second, time.Second, 5
	cli, err := runner.NewClient(runner.ClientConfig{Redis: b.t.rdb})
	if err != nil {
		return err
	}
	defer cli.Close()
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.t.rdb, ID: "bench-worker", Concurrency: b.o.hbNodes,
		LeaseTTL: ttl, HeartbeatInterval: interval, Logger: b.log})
	if err != nil {
		return err
	}
	var running atomic.Int64
	w.Register("hold", runner.KindFunc(func(ctx context.Context, _ *runner.Task) (json.RawMessage, error) {
		running.Add(1)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}))
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer w.Shutdown()
	spec := &runner.RunSpec{ID: "hb", Nodes: make([]runner.NodeSpec, b.o.hbNodes)}
	for i := range spec.Nodes {
		spec.Nodes[i] = runner.NodeSpec{ID: fmt.Sprintf("n%04d", i), Kind: "hold"}
	}
	if _, err := cli.Submit(ctx, spec); err != nil {
		return err
	}
	deadline := time.Now().Add(b.o.timeout)
	for running.Load() < int64(b.o.hbNodes) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d nodes running after %s", running.Load(), b.o.hbNodes, b.o.timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(interval) // a full tick with every node
	c0 := b.t.count.snapshot()
	s0, err := b.t.serverStats(ctx)
	if err != nil {
		return err
	}
	time.Sleep(ticks * interval)
	c1 := b.t.count.snapshot()
	s1, err := b.t.serverStats(ctx)
	if err != nil {
		return err
	}
	d, sd := c1.since(c0), s1.since(s0)
	name := "evalsha baton:heartbeat"
	rtPerTick := float64(d.rtByName[name]) / ticks
	callsPerTick := float64(d.byName[name]) / ticks
	usPerTick := float64(sd.cmds["evalsha"].usec) / ticks
	if _, err := cli.Cancel(ctx, "hb", "bench done"); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nheartbeat: %d running nodes on one worker, %s interval: %.1f round trips per tick, %.0f script calls per tick, %.0f µs of Redis script time per tick\n",
		b.o.hbNodes, interval, rtPerTick, callsPerTick, usPerTick)
	rep["heartbeat"] = map[string]any{"nodes": b.o.hbNodes, "round_trips_per_tick": round2(rtPerTick),
		"calls_per_tick": round1(callsPerTick), "script_us_per_tick": round1(usPerTick)}
	return nil
}
