package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonrun/baton/runner"
)

// pacedResult is one latency measurement at a fixed submit rate.
type pacedResult struct {
	start  []time.Duration // scheduled submit to handler start, sorted
	commit []time.Duration // claim call to commit reply (baton), sorted
	call   []time.Duration // each submit (enqueue) call's own duration, sorted
	cpu    time.Duration   // this process's CPU over the measurement
	idle   time.Duration   // this process's CPU per second while idle afterwards
}

// latency submits one-node runs (and, for comparison, bare Asynq tasks) at
// a fixed rate, -rate per second for -latency-for, and reports submit-to-
// start and claim-to-commit, p50 and p99: the median of -runs rounds. The
// clock of each node starts when its submit was scheduled, so a submit
// that falls behind counts against the latency. The first 5% of each
// measurement is left out as warm-up. Afterwards the idle worker's CPU is
// measured for a second: the price of a short poll interval.
func (b *bench) latency(ctx context.Context, out io.Writer, rep report) error {
	poll := cmp0(b.o.latencyPoll, runner.DefaultPollInterval)
	systems := []string{"asynq", "baton"}
	res := map[string][]pacedResult{}
	for round := range b.o.runs {
		for _, sys := range systems {
			var r pacedResult
			var err error
			if sys == "baton" {
				r, err = b.pacedBaton(ctx, round, poll)
			} else {
				r, err = b.pacedAsynq(ctx, round, poll)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", sys, err)
			}
			res[sys] = append(res[sys], r)
		}
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "latency at %d nodes/s\tpoll\tnodes\tsubmit→start p50\tp99\tclaim→commit p50\tp99\tsubmit call p50\tCPU busy\tCPU idle\t\n", b.o.rate)
	js := map[string]any{"rate": b.o.rate, "poll_ms": msf(poll)}
	for _, sys := range systems {
		med := func(f func(pacedResult) time.Duration) time.Duration {
			var xs []float64
			for _, r := range res[sys] {
				xs = append(xs, float64(f(r)))
			}
			return time.Duration(medianF(xs))
		}
		s50 := med(func(r pacedResult) time.Duration { return quantile(r.start, 0.5) })
		s99 := med(func(r pacedResult) time.Duration { return quantile(r.start, 0.99) })
		c50 := med(func(r pacedResult) time.Duration { return quantile(r.commit, 0.5) })
		c99 := med(func(r pacedResult) time.Duration { return quantile(r.commit, 0.99) })
		call50 := med(func(r pacedResult) time.Duration { return quantile(r.call, 0.5) })
		busy := med(func(r pacedResult) time.Duration { return r.cpu })
		idle := med(func(r pacedResult) time.Duration { return r.idle })
		busyPct := 100 * busy.Seconds() / b.o.latencyFor.Seconds()
		idlePct := 100 * idle.Seconds()
		cc := "—"
		if sys == "baton" {
			cc = ms(c50) + "\t" + ms(c99)
		} else {
			cc = "—\t—"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%.0f%%\t%.1f%%\t\n", sys, ms(poll), len(res[sys][0].start),
			ms(s50), ms(s99), cc, ms(call50), busyPct, idlePct)
		e := map[string]any{"submit_to_start_p50_ms": msf(s50), "submit_to_start_p99_ms": msf(s99),
			"submit_call_p50_ms": msf(call50), "cpu_busy_pct": round1(busyPct), "cpu_idle_pct": round2(idlePct)}
		if sys == "baton" {
			e["claim_to_commit_p50_ms"], e["claim_to_commit_p99_ms"] = msf(c50), msf(c99)
		}
		js[sys] = e
	}
	_ = tw.Flush()
	fmt.Fprintln(out, `
latency    one-node runs (bare Asynq: tasks) submitted at a fixed rate by up to 64 goroutines;
           submit→start from each submit's scheduled time to its handler's start; claim→commit
           from the claim call to the commit's reply (the fence history); submit call: how long
           Client.Submit (Asynq: Enqueue) itself took, its round trips included; CPU busy is this
           process's CPU (workers and submitters) over the measurement, in % of one core; CPU
           idle is the idle worker's over the following second. Median of -runs rounds.`)
	rep["latency"] = js
	return nil
}

func cmp0(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// starts records handler starts by id.
type starts struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *starts) mark(id string) {
	now := time.Now()
	s.mu.Lock()
	if _, ok := s.at[id]; !ok {
		s.at[id] = now
	}
	s.mu.Unlock()
}

func (s *starts) get(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[id]
	return t, ok
}

// pace calls submit(i) at t0 + i/rate for count nodes, at most 64 at once,
// and returns each call's scheduled time and how long each call took.
func pace(ctx context.Context, rate, count int, submit func(ctx context.Context, i int) error) ([]time.Time, []time.Duration, error) {
	sched := make([]time.Time, count)
	took := make([]time.Duration, count)
	sem := make(chan struct{}, 64)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range count {
		at := t0.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		sched[i] = at
		select {
		case sem <- struct{}{}:
		case err := <-errc:
			wg.Wait()
			return nil, nil, err
		case <-ctx.Done():
			wg.Wait()
			return nil, nil, ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t := time.Now()
			err := submit(ctx, i)
			took[i] = time.Since(t)
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return nil, nil, err
	default:
	}
	slices.Sort(took)
	return sched, took, nil
}

// collect waits for every id to have started and returns the sorted
// latencies from each scheduled time, the first 5% left out.
func collect(ctx context.Context, timeout time.Duration, st *starts, sched []time.Time, id func(int) string) ([]time.Duration, error) {
	deadline := time.Now().Add(timeout)
	var lat []time.Duration
	for i := len(sched) / 20; i < len(sched); i++ {
		for {
			t, ok := st.get(id(i))
			if ok {
				lat = append(lat, t.Sub(sched[i]))
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, fmt.Errorf("%s never started", id(i))
			}
			time.Sleep(time.Millisecond)
		}
	}
	slices.Sort(lat)
	return lat, nil
}

// idleCPU is this process's CPU over one second of doing nothing.
func idleCPU() time.Duration {
	c0 := procCPU()
	time.Sleep(time.Second)
	return procCPU() - c0
}

func (b *bench) pacedBaton(ctx context.Context, round int, poll time.Duration) (pacedResult, error) {
	if err := b.t.flush(ctx); err != nil {
		return pacedResult{}, err
	}
	h := &historyTimes{claims: map[string]int64{}, commits: map[string]int64{}}
	st := &starts{at: map[string]time.Time{}}
	cli, err := runner.NewClient(runner.ClientConfig{Redis: b.t.rdb})
	if err != nil {
		return pacedResult{}, err
	}
	defer cli.Close()
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.t.rdb, ID: "bench-worker", Concurrency: b.o.concurrency,
		Dispatchers: b.o.dispatchers[0], PollInterval: poll, Logger: b.log, History: h})
	if err != nil {
		return pacedResult{}, err
	}
	w.Register("noop", runner.KindFunc(func(_ context.Context, t *runner.Task) (json.RawMessage, error) {
		st.mark(t.Lease.Run)
		return json.RawMessage("{}"), nil
	}))
	if err := w.Start(ctx); err != nil {
		return pacedResult{}, err
	}
	defer w.Shutdown()
	id := func(i int) string { return fmt.Sprintf("L%d-%06d", round, i) }
	r, err := b.paced(ctx, st, id, func(ctx context.Context, i int) error {
		_, err := cli.Submit(ctx, &runner.RunSpec{ID: id(i), Nodes: []runner.NodeSpec{{ID: "n", Kind: "noop"}}})
		return err
	})
	if err != nil {
		return pacedResult{}, err
	}
	time.Sleep(200 * time.Millisecond) // the last commits' replies
	r.commit = h.claimToCommit()
	r.idle = idleCPU()
	return r, nil
}

func (b *bench) pacedAsynq(ctx context.Context, round int, poll time.Duration) (pacedResult, error) {
	if err := b.t.flush(ctx); err != nil {
		return pacedResult{}, err
	}
	st := &starts{at: map[string]time.Time{}}
	cli := asynq.NewClientFromRedisClient(b.t.rdb)
	defer cli.Close()
	srv := asynq.NewServerFromRedisClient(b.t.rdb, asynq.Config{Concurrency: b.o.concurrency,
		Queues: map[string]int{queue: 1}, TaskCheckInterval: poll,
		DelayedTaskCheckInterval: max(poll, 100*time.Millisecond), ShutdownTimeout: 5 * time.Second, LogLevel: asynq.WarnLevel})
	if err := srv.Start(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		st.mark(string(t.Payload()))
		return nil
	})); err != nil {
		return pacedResult{}, err
	}
	defer srv.Shutdown()
	id := func(i int) string { return fmt.Sprintf("A%d-%06d", round, i) }
	r, err := b.paced(ctx, st, id, func(ctx context.Context, i int) error {
		_, err := cli.EnqueueContext(ctx, asynq.NewTask(noopType, []byte(id(i))), asynq.Queue(queue))
		return err
	})
	if err != nil {
		return pacedResult{}, err
	}
	r.idle = idleCPU()
	return r, nil
}

// paced submits -rate × -latency-for items at the fixed rate with submit,
// waits until st has seen each one (named by id) start, and returns the
// submit-to-start latencies, the submit calls' own times and this
// process's CPU meanwhile: what both systems' rows measure alike.
func (b *bench) paced(ctx context.Context, st *starts, id func(int) string,
	submit func(ctx context.Context, i int) error) (pacedResult, error) {
	count := int(float64(b.o.rate) * b.o.latencyFor.Seconds())
	cpu0 := procCPU()
	sched, took, err := pace(ctx, b.o.rate, count, submit)
	if err != nil {
		return pacedResult{}, err
	}
	lat, err := collect(ctx, b.o.timeout, st, sched, id)
	if err != nil {
		return pacedResult{}, err
	}
	return pacedResult{start: lat, call: took, cpu: procCPU() - cpu0}, nil
}

// historyTimes reads the worker's fence history (WorkerConfig.History):
// when each node's claim was called and its commit answered.
type historyTimes struct {
	mu      sync.Mutex
	claims  map[string]int64
	commits map[string]int64
}

func (h *historyTimes) Write(p []byte) (int, error) {
	var op struct {
		Op, Run, Node, Outcome string
		Call                   int64
		Return                 int64 `json:"ret"`
	}
	if err := json.Unmarshal(p, &op); err != nil || op.Outcome != "ok" {
		return len(p), nil
	}
	key := op.Run + "/" + op.Node
	h.mu.Lock()
	switch op.Op {
	case "claim":
		h.claims[key] = op.Call
	case "commit":
		h.commits[key] = op.Return
	}
	h.mu.Unlock()
	return len(p), nil
}

func (h *historyTimes) claimToCommit() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []time.Duration
	for k, c := range h.commits {
		if cl, ok := h.claims[k]; ok {
			out = append(out, time.Duration(c-cl))
		}
	}
	slices.Sort(out)
	return out
}
