package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// report collects every section's figures for the bench's final line: one
// JSON object, so a script can read the run without parsing tables.
type report map[string]any

func (r report) print(w io.Writer) {
	b, err := json.Marshal(r)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error":%q}`, err.Error()))
	}
	fmt.Fprintf(w, "\n%s\n", b)
}

func (r report) throughput(rows []*row) {
	var out []map[string]any
	steal := -1.0
	for _, x := range rows {
		for _, res := range x.results {
			steal = max(steal, res.steal)
		}
		m := x.median()
		n := float64(m.nodes)
		e := map[string]any{"system": x.system, "mode": x.mode, "nodes": m.nodes,
			"drain_per_s":         round1(m.drainRate()),
			"redis_cmds_per_node": round2(float64(m.server.calls) / n), "redis_cpu_us_per_node": round1(us(m.server.cpu) / n),
			"cpu_us_per_node": round1(m.cpuPerNode()), "cores": round2(m.cores())}
		if !m.child {
			e["rt_per_node"] = round2(float64(m.submitRT.rtts+m.drainRT.rtts) / n)
		}
		if !math.IsNaN(m.memPerNode) {
			e["redis_bytes_per_node"] = round1(m.memPerNode)
		}
		if m.busy >= 0 {
			e["busy"] = round2(m.busy)
		}
		if b := baseline(rows, x.mode); x.system != "asynq" && b != nil {
			e["x_asynq"] = round2(m.drainRate() / b.median().drainRate())
			e["cpu_bound_x_asynq"] = round2(b.median().cpuPerNode() / m.cpuPerNode())
			e["redis_cpu_x_asynq"] = round2(us(m.server.cpu) / n / (us(b.median().server.cpu) / float64(b.median().nodes)))
		}
		for _, removed := range []bool{false, true} {
			b := bullmqBaseline(rows, x.mode, removed)
			if x.system != "baton" || b == nil {
				continue
			}
			suffix := "kept"
			if removed {
				suffix = "removed"
			}
			bm := b.median()
			e["x_bullmq_"+suffix] = round2(m.drainRate() / bm.drainRate())
			e["cpu_bound_x_bullmq_"+suffix] = round2(bm.cpuPerNode() / m.cpuPerNode())
			e["redis_cpu_x_bullmq_"+suffix] = round2(us(m.server.cpu) / n / (us(bm.server.cpu) / float64(bm.nodes)))
		}
		out = append(out, e)
	}
	r["throughput"] = out
	if steal >= 0 {
		r["host_steal_max"] = round2(steal) // share of CPU time, the worst drain
	}
}

func (r report) cancels(rows []cancelRow) {
	out := map[string]any{}
	for _, x := range rows {
		out[x.kind] = map[string]any{"n": len(x.lat), "p50_ms": msf(x.quantile(0.5)), "p99_ms": msf(x.quantile(0.99))}
	}
	r["cancel"] = out
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
func round2(f float64) float64 { return math.Round(f*100) / 100 }
func msf(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*100) / 100
}

// quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// medianF is the median of xs.
func medianF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
