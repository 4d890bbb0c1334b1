package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one system and mode over every round.
type row struct {
	system, mode string
	results      []result
}

// median is the round with the median drain rate: every column of a row
// comes from the same round.
func (r *row) median() result {
	s := slices.SortedFunc(slices.Values(r.results), func(a, b result) int {
		return cmp.Compare(a.drainRate(), b.drainRate())
	})
	return s[len(s)/2]
}

func (r *row) spread() (lo, hi float64) {
	lo, hi = r.results[0].drainRate(), r.results[0].drainRate()
	for _, x := range r.results[1:] {
		lo, hi = min(lo, x.drainRate()), max(hi, x.drainRate())
	}
	return lo, hi
}

// baseline is the asynq row a baton (or BullMQ) mode is compared with.
func baseline(rows []*row, mode string) *row {
	return find(rows, "asynq", baseShape(mode))
}

// bullmqBaseline is the BullMQ row a baton mode is compared with: the
// same shape (flat for single, thread and wide), completed jobs kept or
// removed.
func bullmqBaseline(rows []*row, mode string, removed bool) *row {
	if removed {
		return find(rows, "bullmq", baseShape(mode)+" removed")
	}
	return find(rows, "bullmq", baseShape(mode)+" kept")
}

// baseShape is the baselines' shape for a mode: "chain k=10" for chains,
// else "flat" (independent tasks).
func baseShape(mode string) string {
	if strings.HasPrefix(mode, "chain") {
		shape, _, _ := strings.Cut(mode, " d=") // the baselines have no dispatchers
		shape = strings.TrimSuffix(strings.TrimSuffix(shape, " kept"), " removed")
		return shape
	}
	return "flat"
}

func find(rows []*row, system, mode string) *row {
	for _, r := range rows {
		if r.system == system && r.mode == mode {
			return r
		}
	}
	return nil
}

// ratio is a's median drain/s over b's, or "—" without b.
func ratio(a, b *row) string {
	if b == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", a.median().drainRate()/b.median().drainRate())
}

func printTable(w io.Writer, rows []*row, skipBullMQ string) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tmode\tnodes\tsubmit/s\tdrain/s\tmin–max\t×asynq\t×bullmq kept\t×bullmq removed\tCPU-bound ×asynq\tCPU-bound ×bullmq kept\tbusy\tcores\tRT/node submit\tRT/node drain\tRT/node total\tredis cmds/node\tredis µs/node\tbench µs/node\tredis B/node\t")
	for _, r := range rows {
		m := r.median()
		lo, hi := r.spread()
		xa, bound, xk, xr, boundK := "—", "—", "—", "—", "—"
		if b := baseline(rows, r.mode); r.system != "asynq" && b != nil {
			xa = ratio(r, b)
			bound = fmt.Sprintf("%.2f", b.median().cpuPerNode()/m.cpuPerNode())
		}
		if r.system == "baton" {
			kept := bullmqBaseline(rows, r.mode, false)
			xk, xr = ratio(r, kept), ratio(r, bullmqBaseline(rows, r.mode, true))
			if kept != nil {
				boundK = fmt.Sprintf("%.2f", kept.median().cpuPerNode()/m.cpuPerNode())
			}
			if skipBullMQ != "" {
				xk, xr, boundK = "skipped", "skipped", "skipped"
			}
		}
		n := float64(m.nodes)
		rt := []string{"—", "—", "—"}
		if !m.child {
			rt = []string{fmt.Sprintf("%.2f", float64(m.submitRT.rtts)/n), fmt.Sprintf("%.2f", float64(m.drainRT.rtts)/n),
				fmt.Sprintf("%.2f", float64(m.submitRT.rtts+m.drainRT.rtts)/n)}
		}
		mem := "—"
		if !math.IsNaN(m.memPerNode) {
			mem = fmt.Sprintf("%.0f", m.memPerNode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.0f–%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t%s\t\n",
			r.system, r.mode, m.nodes, m.submitRate(), m.drainRate(), lo, hi, xa, xk, xr, bound, boundK, pct(m.busy), m.cores(),
			rt[0], rt[1], rt[2], float64(m.server.calls)/n, us(m.server.cpu)/n, us(m.proc)/n, mem)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, `
submit/s   nodes enqueued (runs submitted, jobs added) per second while the queue was paused
drain/s    nodes (tasks) per second from the first delivery to the last task's end
           (baton: and every finished run retained)
×asynq     drain/s over bare asynq's (flat for single, thread and wide, chain for chain)
×bullmq    baton's drain/s over BullMQ's, completed jobs kept (removeOnComplete: false; baton
           keeps a finished run too) and removed (true; as asynq, retention 0). BullMQ's flat
           (independent jobs) stands for single, thread and wide (it has no runs or threads);
           its chain for chain: each job's processor adds the next, as asynq's chain does
           (not a FlowProducer flow, whose parent waits on its children)
CPU-bound  asynq's CPU per node (Redis's and the worker process's, the columns on the right) over
 ×asynq    this row's: the ×asynq the machine's cores allow when both drains keep them busy. A
           ×asynq near it says the drains were bound by CPU; above it, that asynq's was bound
           by something else first (its one dequeue loop's round trip); ×bullmq kept: the
           same against BullMQ with completed jobs kept
busy       share of the machine's CPU time some process used during the drain (not idle,
           not taken by the host)
cores      CPU the system got during its drain (Redis's and the worker process's CPU time
           over the drain's): on a machine others keep busy, a share the scheduler decides;
           BullMQ's one event-loop thread may get less of it than a Go process's threads
RT/node    client round trips per node (a pipeline is one), counted by a go-redis hook;
           the drain includes both servers' background work (heartbeats, sweeps, forwarder);
           not counted for BullMQ (its node process)
redis      commands Redis executed (commandstats, scripts' inner calls included) and its CPU,
           per node, during the drain; server-wide: exact only on a Redis nobody else uses
           (on a cluster: summed over every master; a pipeline counts one round trip though
           the cluster client sends one to each master it touches)
bench µs   the worker process's CPU per node during the drain: this process's (workers,
           clients, hook); for BullMQ its node process's, which measures it itself
redis B    used_memory after the drain less before the submit, per node: what a system keeps
           of finished work (baton: retained runs; BullMQ kept: job hashes and the completed
           set; both: their event streams, BullMQ's capped at about 10,000 events); near 0
           or below: nothing kept (asynq, BullMQ removed), within used_memory's noise
Each row is the round with the median drain/s; min–max spans every round.`)
	if skipBullMQ != "" {
		fmt.Fprintf(w, "BullMQ: SKIPPED (%s): its rows and ×bullmq are missing.\n", skipBullMQ)
	}
}

// printBreakdown lists the commands each system sent per node in its median
// round.
func printBreakdown(w io.Writer, rows []*row) {
	for _, r := range rows {
		m := r.median()
		if m.child {
			fmt.Fprintf(w, "\n%s %s: round trips not counted (a node process of its own)\n", r.system, r.mode)
		}
		for _, phase := range []struct {
			name string
			c    counts
		}{{"submit", m.submitRT}, {"drain", m.drainRT}} {
			fmt.Fprintf(w, "\n%s %s, %s: commands per node (%d nodes)\n", r.system, r.mode, phase.name, m.nodes)
			names := slices.SortedFunc(maps.Keys(phase.c.byName), func(a, b string) int {
				return cmp.Or(cmp.Compare(phase.c.byName[b], phase.c.byName[a]), cmp.Compare(a, b))
			})
			for _, name := range names {
				fmt.Fprintf(w, "  %-36s %8.3f  (%d)\n", name, float64(phase.c.byName[name])/float64(m.nodes), phase.c.byName[name])
			}
		}
		fmt.Fprintf(w, "\n%s %s, drain: Redis commandstats per node (calls, µs executing; evalsha includes its scripts' calls)\n", r.system, r.mode)
		cmds := m.server.cmds
		names := slices.SortedFunc(maps.Keys(cmds), func(a, b string) int {
			return cmp.Or(cmp.Compare(cmds[b].usec, cmds[a].usec), cmp.Compare(a, b))
		})
		for _, name := range names {
			c := cmds[name]
			fmt.Fprintf(w, "  %-36s %8.3f calls %8.2f µs\n", name, float64(c.calls)/float64(m.nodes), float64(c.usec)/float64(m.nodes))
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// stealWarn is the share of CPU time stolen by the host in a drain above
// which the bench says its ratios are not to be trusted: the two systems'
// rounds ran on machines of different speeds.
const stealWarn = 0.10

// printSteal prints the host's CPU steal over every drain, and a warning
// when a drain lost more than stealWarn of its CPU time to it.
func printSteal(w io.Writer, rows []*row) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, x := range r.results {
			if x.steal >= 0 {
				lo, hi = min(lo, x.steal), max(hi, x.steal)
			}
		}
	}
	if math.IsInf(hi, -1) {
		return // not on Linux
	}
	fmt.Fprintf(w, "\nhost CPU steal during the drains: %s–%s of the machine's CPU time\n", pct(lo), pct(hi))
	if hi > stealWarn {
		fmt.Fprintf(w, "warning: the host took more than %s of the CPU in some drains: the rounds ran at different speeds; "+
			"compare ratios only from a run without this warning\n", pct(stealWarn))
	}
}

// pct formats a share as a percentage; "?" when unknown (negative).
func pct(f float64) string {
	if f < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

// loadAverage is the 1-minute load average, or "?" off Linux.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
