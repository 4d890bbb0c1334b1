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

// baseline is the asynq row a baton mode is compared with.
func baseline(rows []*row, mode string) *row {
	want := "flat"
	if strings.HasPrefix(mode, "chain") {
		want, _, _ = strings.Cut(mode, " d=") // asynq has no dispatchers
	}
	for _, r := range rows {
		if r.system == "asynq" && r.mode == want {
			return r
		}
	}
	return nil
}

func printTable(w io.Writer, rows []*row) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tmode\tnodes\tsubmit/s\tdrain/s\tmin–max\t×asynq\tCPU-bound ×asynq\tbusy\tRT/node submit\tRT/node drain\tRT/node total\tredis cmds/node\tredis µs/node\tbench µs/node\t")
	for _, r := range rows {
		m := r.median()
		lo, hi := r.spread()
		ratio, bound := "—", "—"
		if b := baseline(rows, r.mode); r.system == "baton" && b != nil {
			ratio = fmt.Sprintf("%.2f", m.drainRate()/b.median().drainRate())
			bound = fmt.Sprintf("%.2f", b.median().cpuPerNode()/m.cpuPerNode())
		}
		n := float64(m.nodes)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.0f–%.0f\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t\n",
			r.system, r.mode, m.nodes, m.submitRate(), m.drainRate(), lo, hi, ratio, bound, pct(m.busy),
			float64(m.submitRT.rtts)/n, float64(m.drainRT.rtts)/n, float64(m.submitRT.rtts+m.drainRT.rtts)/n,
			float64(m.server.calls)/n, us(m.server.cpu)/n, us(m.proc)/n)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, `
submit/s   nodes enqueued (runs submitted) per second while the queue was paused
drain/s    nodes (tasks) per second from the first delivery to the last task's end
           (baton: and every finished run retained)
×asynq     baton's drain/s over asynq's (flat for single and wide, chain for chain)
CPU-bound  asynq's CPU per node (Redis's and this process's, the columns on the right) over
 ×asynq    baton's: the ×asynq the machine's cores allow when both drains keep them busy. A
           ×asynq near it says the drains were bound by CPU; above it, that asynq's was bound
           by something else first (its one dequeue loop's round trip)
busy       share of the machine's CPU time some process used during the drain (not idle,
           not taken by the host)
RT/node    client round trips per node (a pipeline is one), counted by a go-redis hook;
           the drain includes both servers' background work (heartbeats, sweeps, forwarder)
redis      commands Redis executed (commandstats, scripts' inner calls included) and its CPU,
           per node, during the drain; server-wide: exact only on a Redis nobody else uses
           (on a cluster: summed over every master; a pipeline counts one round trip though
           the cluster client sends one to each master it touches)
bench µs   this process's CPU per node during the drain (workers, clients, hook)
Each row is the round with the median drain/s; min–max spans every round.`)
}

// printBreakdown lists the commands each system sent per node in its median
// round.
func printBreakdown(w io.Writer, rows []*row) {
	for _, r := range rows {
		m := r.median()
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
