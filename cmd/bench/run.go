package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"time"
)

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, getenv, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	}
	fmt.Fprintf(stdout, "bench:  n=%d concurrency=%d poll=%s mode=%s k=%d runs=%d warmup=%d submitters=%d rtt=%s cancels=%d queues=%d\n",
		o.n, o.concurrency, o.poll, o.mode, o.k, o.runs, o.warmup, o.submitters, o.rtt, o.cancels, o.queues)
	fmt.Fprintf(stdout, "host:   %d CPUs, GOMAXPROCS %d, load average %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), loadAverage())
	fmt.Fprintf(stdout, "sections: %s (each figure is the median of -runs rounds unless said otherwise; this box's speed drifts, compare ratios)\n",
		strings.Join(o.sections, ","))
	var counted *ownRedis // the server whose instructions are counted (-callgrind)
	if o.ownRedis {
		own, err := startOwnRedis(ctx, o.callgrind)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer own.stop()
		o.redisURL = own.url
		if o.callgrind {
			counted = own
		}
	}
	if o.cluster > 0 {
		own, err := startOwnCluster(ctx, o.cluster)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer own.stop()
		o.clusterAddrs = own.addrs
	}
	t, err := openTarget(ctx, o, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer t.close()
	rep := report{"redis": map[string]any{"masters": t.masters, "cluster": t.cluster != nil, "queues": t.queues}}
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := t.flush(fctx); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
		}
	}()

	b := &bench{o: o, t: t, profile: map[string]bool{}, counted: counted,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))}
	defer rep.print(stdout)
	// Each entry is one row of the throughput table: a system in a shape.
	type entry struct {
		system, mode string
		measure      func(ctx context.Context, round int) (result, error)
	}
	var entries []entry
	var rows []*row
	add := func(system, mode string, measure func(ctx context.Context, round int) (result, error)) {
		entries = append(entries, entry{system, mode, measure})
		rows = append(rows, &row{system: system, mode: mode})
	}
	addScenario := func(sc scenario) {
		add(sc.system(), sc.mode(), func(ctx context.Context, round int) (result, error) { return b.measure(ctx, sc, round) })
	}
	pkg, skipBullMQ := findBullMQ(o)
	addBullMQ := func(chain bool) {
		if skipBullMQ != "" {
			return
		}
		for _, removed := range []bool{false, true} {
			sc := &bullmqScenario{o: o, t: t, pkg: pkg, chain: chain, removed: removed}
			add(sc.system(), sc.mode(), func(ctx context.Context, _ int) (result, error) { return b.measureBullMQ(ctx, sc) })
		}
	}
	flat := false // single, thread and wide share asynq's and BullMQ's flat baselines
	var shapes []string
	if o.has("throughput") {
		shapes = o.batonModes()
		if skipBullMQ == "" {
			fmt.Fprintf(stdout, "bullmq: %s in %s, node %s (a process of its own per measurement)\n", pkg.version, pkg.dir, pkg.node)
			rep["bullmq"] = map[string]any{"version": pkg.version}
		} else {
			fmt.Fprintf(stdout, "bullmq: SKIPPED: %s\n", skipBullMQ)
			rep["bullmq"] = map[string]any{"skipped": skipBullMQ}
		}
	}
	for _, m := range shapes {
		switch {
		case m == "chain":
			addScenario(&asynqScenario{o: o, t: t, chain: true})
			addBullMQ(true)
		case !flat:
			addScenario(&asynqScenario{o: o, t: t})
			addBullMQ(false)
			flat = true
		}
		for _, d := range o.dispatchers {
			addScenario(&batonScenario{o: o, t: t, log: b.log, shape: m, dispatchers: d})
		}
		if m == shapes[0] {
			for _, r := range o.traceSample {
				addScenario(&batonScenario{o: o, t: t, log: b.log, shape: m, dispatchers: o.dispatchers[0], traced: true, sample: r})
			}
		}
	}

	for round := 1; round <= o.runs; round++ {
		for i, e := range entries {
			res, err := e.measure(ctx, round)
			if err != nil {
				fmt.Fprintf(stderr, "bench: %s %s, round %d: %v\n", e.system, e.mode, round, err)
				return 1
			}
			rows[i].results = append(rows[i].results, res)
			fmt.Fprintf(stderr, "round %d/%d  %-6s %-14s submit %7.0f/s  drain %7.0f/s  (load %s, steal %s, busy %s)\n",
				round, o.runs, e.system, e.mode, res.submitRate(), res.drainRate(), loadAverage(), pct(res.steal), pct(res.busy))
		}
	}
	if len(rows) > 0 {
		printTable(stdout, rows, skipBullMQ)
		printSteal(stdout, rows)
		if o.verbose {
			printBreakdown(stdout, rows)
		}
		rep.throughput(rows)
	}
	for _, sec := range o.sections {
		var err error
		switch sec {
		case "limits":
			err = b.limits(ctx, stdout, rep)
		case "scripts":
			err = b.scripts(ctx, stdout, rep)
		case "latency":
			err = b.latency(ctx, stdout, rep)
		case "cancel":
			if o.cancels == 0 {
				continue
			}
			cb := &cancelBench{o: o, t: t, log: b.log}
			var crows []cancelRow
			if crows, err = cb.run(ctx); err == nil {
				printCancels(stdout, crows)
				rep.cancels(crows)
			}
		case "takeover":
			err = b.takeover(ctx, stdout, rep)
		case "heartbeat":
			err = b.heartbeat(ctx, stdout, rep)
		case "memory", "sweep":
			if t.cluster != nil {
				// Both read one server's used_memory and copy keys by DUMP.
				fmt.Fprintf(stdout, "\n%s: skipped on a cluster (it measures one server's used_memory)\n", sec)
				rep[sec] = "skipped on a cluster"
				continue
			}
			if sec == "memory" {
				err = b.memory(ctx, stdout, rep)
			} else {
				err = b.sweep(ctx, stdout, rep)
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: %s: %v\n", sec, err)
			return 1
		}
	}
	return 0
}
