package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// scriptCost is one operation called alone, one call at a time.
type scriptCost struct {
	name       string
	cpuUS      float64 // Redis CPU per call (used_cpu_*), everything included
	instr      float64 // instructions Redis executed per call (-callgrind; else 0)
	scriptUS   float64 // time Redis spent in the script (commandstats evalsha), its inner commands included
	cmds, rtts float64 // Redis commands executed (inner ones included) and client round trips per call
}

// scripts measures each hot operation alone: calls of one operation, one at
// a time, on an otherwise idle database, with Redis's counters read before
// and after. The median of -runs rounds.
func (b *bench) scripts(ctx context.Context, out io.Writer, rep report) error {
	calls := b.o.scriptCalls
	var rounds [][]scriptCost
	for round := range b.o.runs {
		r, err := b.scriptsRound(ctx, round, calls)
		if err != nil {
			return err
		}
		rounds = append(rounds, r)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "operation\tcalls\tRedis CPU µs/call\tin script µs/call\tRedis cmds/call\tround trips/call\t"
	if b.counted != nil {
		head += "Redis instructions/call\t"
	}
	fmt.Fprintln(tw, head)
	js := map[string]any{}
	for i, first := range rounds[0] {
		var cpu, scr, cmds, rtts, instr []float64
		for _, r := range rounds {
			cpu, scr, cmds, rtts = append(cpu, r[i].cpuUS), append(scr, r[i].scriptUS), append(cmds, r[i].cmds), append(rtts, r[i].rtts)
			instr = append(instr, r[i].instr)
		}
		c := scriptCost{name: first.name, cpuUS: medianF(cpu), scriptUS: medianF(scr), cmds: medianF(cmds), rtts: medianF(rtts), instr: medianF(instr)}
		line := fmt.Sprintf("%s\t%d\t%.1f\t%.1f\t%.2f\t%.2f\t", c.name, calls, c.cpuUS, c.scriptUS, c.cmds, c.rtts)
		fig := map[string]any{"redis_cpu_us": round1(c.cpuUS), "script_us": round1(c.scriptUS),
			"redis_cmds": round2(c.cmds), "round_trips": round2(c.rtts)}
		if b.counted != nil {
			line += fmt.Sprintf("%.0f\t", c.instr)
			fig["redis_instructions"] = math.Round(c.instr)
		}
		fmt.Fprintln(tw, line)
		js[c.name] = fig
	}
	_ = tw.Flush()
	fmt.Fprintln(out, `
operation  each called alone, one call at a time: submit (a one-node run, its pipeline
           and script), claim, heartbeat, commit, retain (the finished runs' retention,
           which packs each into one key, one call for all, per run), sweep (a pass over
           empty indexes), and
           Asynq's enqueue for comparison. Redis CPU is used_cpu_user+sys per call,
           parsing and networking included; "in script" is commandstats' evalsha time.
           Redis instructions (-callgrind) are callgrind's count over the calls,
           networking and idle timers included, the kernel's share not; the CPU
           and times are then valgrind's, some fifty times the real ones.`)
	rep["scripts"] = js
	return nil
}

func (b *bench) scriptsRound(ctx context.Context, round, calls int) ([]scriptCost, error) {
	if err := b.t.flush(ctx); err != nil {
		return nil, err
	}
	st := fence.New(b.t.rdb, nil)
	if err := st.Load(ctx); err != nil {
		return nil, err
	}
	// Runs "s…" go through every operation with st.
	ref := func(set string, i int) fence.NodeRef {
		id := fmt.Sprintf("%s%d-%05d", set, round, i)
		return fence.NodeRef{Thread: id, Run: id, Node: "n"}
	}
	submit := func(r fence.NodeRef) error {
		_, err := st.Submit(ctx, fence.SubmitArgs{Run: r.Run, Nodes: []fence.NodeSpec{
			{ID: "n", Kind: "noop", Queue: queue, Input: "{}", MaxAttempts: 3}}})
		return err
	}
	claim := func(r fence.NodeRef) (*fence.Claimed, error) {
		return st.ClaimKinds(ctx, r, "bench-worker", fence.NewClaimID(), []string{"noop"}, 30*time.Second, time.Second)
	}
	leases := make([]*fence.Claimed, calls)
	aq := asynq.NewClientFromRedisClient(b.t.rdb)
	defer aq.Close()
	ops := []struct {
		name string
		prep func(i int) error // before the measurement, for each call
		call func(i int) error
	}{
		{"submit", nil, func(i int) error { return submit(ref("s", i)) }},
		{"claim", nil, func(i int) error {
			c, err := claim(ref("s", i))
			leases[i] = c
			return err
		}},
		{"heartbeat", nil, func(i int) error {
			_, err := st.Heartbeat(ctx, leases[i].Lease, 30*time.Second, 0)
			return err
		}},
		{"commit", nil, func(i int) error {
			_, err := st.Commit(ctx, leases[i].Lease, []byte("{}"), leases[i].Dependents)
			return err
		}},
		{"retain", nil, func(i int) error { // every run finished above, in one call: the figures are per run
			if i > 0 {
				return nil
			}
			n, err := st.RetainFinished(ctx, runner.DefaultRetention, int64(calls))
			if err == nil && n != calls {
				err = fmt.Errorf("retained %d runs, want %d", n, calls)
			}
			return err
		}},
		{"sweep", nil, func(int) error {
			_, err := st.Sweep(ctx, fence.SweepOptions{Grace: time.Second, Threshold: 15 * time.Second, Limit: 200, Retry: 5 * time.Second})
			return err
		}},
		{"asynq enqueue", nil, func(i int) error {
			_, err := aq.EnqueueContext(ctx, asynq.NewTask(noopType, []byte(`{"chain":"x","step":0}`)), asynq.Queue("bench-alone"))
			return err
		}},
	}
	var res []scriptCost
	for _, op := range ops {
		if op.prep != nil {
			for i := range calls {
				if err := op.prep(i); err != nil {
					return nil, fmt.Errorf("%s %d: %w", op.name, i, err)
				}
			}
		}
		s0, err := b.t.serverStats(ctx)
		if err != nil {
			return nil, err
		}
		c0 := b.t.count.snapshot()
		callAll := func() error {
			for i := range calls {
				if err := op.call(i); err != nil {
					return fmt.Errorf("%s %d: %w", op.name, i, err)
				}
			}
			return nil
		}
		var instr int64
		if b.counted != nil {
			instr, err = b.counted.instructions(callAll)
		} else {
			err = callAll()
		}
		if err != nil {
			return nil, err
		}
		c1 := b.t.count.snapshot()
		s1, err := b.t.serverStats(ctx)
		if err != nil {
			return nil, err
		}
		d, n := s1.since(s0), float64(calls)
		res = append(res, scriptCost{name: op.name, cpuUS: us(d.cpu) / n, scriptUS: float64(d.cmds["evalsha"].usec) / n, instr: float64(instr) / n,
			cmds: float64(d.calls-int64(b.t.masters)) / n, rtts: float64(c1.since(c0).rtts) / n}) // the INFO on each master
	}
	return res, nil
}
