package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/spec"
)

// The limits every node of a limited row names: a concurrency limit and a
// rate, each far above what the drain reaches, so that nothing waits and
// the row measures what a limit costs a claim (taking a slot and a token
// in claim.lua, freeing the slot in commit.lua) and nothing else.
const (
	benchConcLimit = "bench-concurrency"
	benchRateLimit = "bench-rate"
	// benchRate per second, with as much burst: a GCRA interval of 10 µs.
	benchRate = 100000
)

var benchLimitUses = []spec.LimitUse{{Name: benchConcLimit}, {Name: benchRateLimit}}

// benchConcurrency is the limited rows' concurrency limit: 1000, or more
// with -concurrency above 500, so that it never throttles.
func benchConcurrency(o options) int { return max(1000, 2*o.concurrency) }

// setBenchLimits sets the limits the limited rows' nodes name.
func setBenchLimits(ctx context.Context, cli *runner.Client, o options) error {
	if err := cli.SetLimit(ctx, fence.Limit{Name: benchConcLimit, Concurrency: benchConcurrency(o)}); err != nil {
		return err
	}
	return cli.SetLimit(ctx, fence.Limit{Name: benchRateLimit, Rate: benchRate, Period: time.Second, Burst: benchRate})
}

// limits measures the claim cost of limits: baton's single shape drained
// as the throughput section drains it, without limits and with every node
// naming benchLimits, one after the other in each round, and prints both
// and their ratios, on a single server or a Redis Cluster (where a claim
// takes its limits in their own slots: docs/flow-control.md).
func (b *bench) limits(ctx context.Context, w io.Writer, rep report) error {
	if err := b.t.flush(ctx); err != nil {
		return err
	}
	probe, err := runner.NewClient(runner.ClientConfig{Redis: b.t.rdb})
	if err != nil {
		return err
	}
	err = setBenchLimits(ctx, probe, b.o)
	_ = probe.Close()
	if err != nil {
		return fmt.Errorf("set the bench's limits: %w", err)
	}
	rows := []*row{{system: "baton", mode: "single"}, {system: "baton", mode: "single limits"}}
	scs := []*batonScenario{
		{o: b.o, t: b.t, log: b.log, shape: "single", dispatchers: b.o.dispatchers[0]},
		{o: b.o, t: b.t, log: b.log, shape: "single", dispatchers: b.o.dispatchers[0], limited: true},
	}
	for round := 1; round <= b.o.runs; round++ {
		for i, sc := range scs {
			res, err := b.measure(ctx, sc, round)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", rows[i].mode, round, err)
			}
			rows[i].results = append(rows[i].results, res)
			if b.o.verbose {
				fmt.Fprintf(w, "limits round %d/%d  %-14s drain %7.0f/s\n", round, b.o.runs, rows[i].mode, res.drainRate())
			}
		}
	}
	without, with := rows[0].median(), rows[1].median()
	fig := func(r result) map[string]any {
		n := float64(r.nodes)
		return map[string]any{"nodes": r.nodes, "claims_per_s": round1(r.drainRate()),
			"rt_per_node":           round2(float64(r.submitRT.rtts+r.drainRT.rtts) / n),
			"drain_rt_per_node":     round2(float64(r.drainRT.rtts) / n),
			"redis_cmds_per_node":   round2(float64(r.server.calls) / n),
			"redis_cpu_us_per_node": round1(us(r.server.cpu) / n),
			"cpu_us_per_node":       round1(r.cpuPerNode())}
	}
	fw, fo := fig(with), fig(without)
	x := func(k string) float64 {
		if fo[k].(float64) == 0 {
			return 0
		}
		return round2(fw[k].(float64) / fo[k].(float64))
	}
	fmt.Fprintf(w, "\nlimits: one-node runs, every node naming a concurrency limit (%d at once) and a rate (%d/s, burst %d), "+
		"neither of which throttles, against the same runs without (each figure the round with the median claims/s)\n",
		benchConcurrency(b.o), benchRate, benchRate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tnodes\tclaims/s\tmin–max\tRT/node drain\tredis cmds/node\tredis µs/node\tCPU µs/node\t")
	for i, r := range rows {
		m, f := r.median(), []map[string]any{fo, fw}[i]
		lo, hi := r.spread()
		name := "without limits"
		if i == 1 {
			name = "with limits"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f–%.0f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", name, m.nodes, m.drainRate(), lo, hi,
			f["drain_rt_per_node"], f["redis_cmds_per_node"], f["redis_cpu_us_per_node"], f["cpu_us_per_node"])
	}
	fmt.Fprintf(tw, "with/without\t\t%.2f\t\t%.2f\t%.2f\t%.2f\t%.2f\t\n", x("claims_per_s"), x("drain_rt_per_node"),
		x("redis_cmds_per_node"), x("redis_cpu_us_per_node"), x("cpu_us_per_node"))
	_ = tw.Flush()
	fmt.Fprintln(w, `claims/s   nodes (one claim each) per second from the first delivery to the last node's end
           and every finished run retained, as drain/s in the throughput table
RT/node    the worker's round trips per node during the drain; redis: commands Redis executed
           per node (scripts' inner calls included) and its CPU; CPU: Redis's and the bench's`)
	rep["limits"] = map[string]any{"concurrency": benchConcurrency(b.o), "rate_per_s": benchRate, "burst": benchRate,
		"without": fo, "with": fw,
		"x_claims_per_s": x("claims_per_s"), "x_redis_cmds_per_node": x("redis_cmds_per_node"),
		"x_drain_rt_per_node": x("drain_rt_per_node"), "x_redis_cpu_us_per_node": x("redis_cpu_us_per_node"),
		"x_cpu_us_per_node": x("cpu_us_per_node")}
	return nil
}
