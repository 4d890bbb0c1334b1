package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// usedMemory is Redis's used_memory: server-wide, so exact only on a Redis
// nobody else uses (-own-redis).
func (t *target) usedMemory(ctx context.Context) (int64, error) {
	info, err := t.raw.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("info memory: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("info memory: no used_memory")
}

// finish runs n no-op nodes as runs of size nodes through a worker with the
// default retention and returns once every run has finished and the
// sweeper has applied its retention (its keys carry a TTL, the finished
// index is empty).
func (b *bench) finish(ctx context.Context, tag string, n, size int) (runs int, err error) {
	cli, err := runner.NewClient(runner.ClientConfig{Redis: b.t.rdb})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.t.rdb, ID: "bench-worker", Concurrency: b.o.concurrency,
		Logger: b.log, SweepInterval: 100 * time.Millisecond})
	if err != nil {
		return 0, err
	}
	p := &progress{}
	w.Register("noop", runner.KindFunc(func(context.Context, *runner.Task) (json.RawMessage, error) {
		p.done.Add(1)
		return json.RawMessage("{}"), nil
	}))
	if err := w.Start(ctx); err != nil {
		return 0, err
	}
	defer w.Shutdown()
	if runs, err = b.submitRuns(ctx, cli, tag, n, size); err != nil {
		return 0, err
	}
	if _, err := b.drained(ctx, p, runs*size, nil); err != nil {
		return 0, err
	}
	keys := cli.Store().Keys()
	deadline := time.Now().Add(b.o.timeout)
	for {
		var left int64
		for shard := range fence.Shards {
			n, err := b.t.raw.ZCard(ctx, keys.Finished(shard)).Result()
			if err != nil {
				return 0, err
			}
			left += n
		}
		if left == 0 {
			return runs, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d runs still waiting for their retention", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submitRuns submits n no-op nodes (rounded up) as runs of size
// independent nodes, from -submitters goroutines, and returns how many
// runs.
func (b *bench) submitRuns(ctx context.Context, cli *runner.Client, tag string, n, size int) (int, error) {
	runs := (n + size - 1) / size
	sc := &batonScenario{o: b.o, t: b.t, shape: "wide"}
	sc.o.k = size
	return runs, parallel(ctx, runs, b.o.submitters, func(ctx context.Context, i int) error {
		_, err := cli.Submit(ctx, sc.spec(tag, i))
		return err
	})
}

// waiting submits n no-op nodes as runs of size nodes, with no worker to
// run them, and returns Redis's used_memory per node they hold while they
// wait: Asynq's task and baton's run, node and stream keys.
func (b *bench) waiting(ctx context.Context, tag string, n, size int) (float64, error) {
	if err := b.t.flush(ctx); err != nil {
		return 0, err
	}
	cli, err := runner.NewClient(runner.ClientConfig{Redis: b.t.rdb})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	m0, err := b.t.usedMemory(ctx)
	if err != nil {
		return 0, err
	}
	runs, err := b.submitRuns(ctx, cli, tag, n, size)
	if err != nil {
		return 0, err
	}
	m1, err := b.t.usedMemory(ctx)
	if err != nil {
		return 0, err
	}
	return float64(m1-m0) / float64(runs*size), nil
}

// memory measures Redis memory per no-op node while its run waits to run
// and once it has finished and is retained: used_memory before and after
// -mem-nodes nodes were submitted, and ran, as one-node runs and as runs
// of k nodes, and MEMORY USAGE of each key of one finished run.
func (b *bench) memory(ctx context.Context, out io.Writer, rep report) error {
	js := map[string]any{}
	fmt.Fprintln(out)
	for _, size := range []int{1, b.o.k} {
		wait, err := b.waiting(ctx, fmt.Sprintf("wait%d", size), b.o.memNodes, size)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "memory: runs of %d node(s), %d nodes submitted and waiting (no worker): %.0f B per node (used_memory)\n",
			size, b.o.memNodes, wait)
		js[fmt.Sprintf("waiting_bytes_per_node_k%d", size)] = round1(wait)
	}
	for _, size := range []int{1, b.o.k} {
		if err := b.t.flush(ctx); err != nil {
			return err
		}
		m0, err := b.t.usedMemory(ctx)
		if err != nil {
			return err
		}
		tag := fmt.Sprintf("mem%d", size)
		runs, err := b.finish(ctx, tag, b.o.memNodes, size)
		if err != nil {
			return err
		}
		m1, err := b.t.usedMemory(ctx)
		if err != nil {
			return err
		}
		nodes := runs * size
		per := float64(m1-m0) / float64(nodes)
		keys := fence.Keys{}
		id := runID(tag, 0)
		// A run that SUCCEEDED is packed into one key as it is retained.
		parts := []struct{ name, key string }{{"packed", keys.Packed(id, id)}} // a run without a thread has no locator
		var detail []string
		for _, p := range parts {
			u, err := b.t.raw.MemoryUsage(ctx, p.key).Result()
			if err != nil && err != redis.Nil {
				return err
			}
			detail = append(detail, fmt.Sprintf("%s %d B", p.name, u))
		}
		held, err := b.reloaded(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "memory: runs of %d node(s), %d nodes finished and retained (packed): %.0f B per node (used_memory; %.0f B stored afresh); one run: %s\n",
			size, nodes, per, float64(held)/float64(nodes), strings.Join(detail, ", "))
		js[fmt.Sprintf("bytes_per_node_k%d", size)] = round1(per)
		js[fmt.Sprintf("reloaded_bytes_per_node_k%d", size)] = round1(float64(held) / float64(nodes))
	}
	rep["memory"] = js
	return nil
}

// sweep measures a sweeper pass (Sweep, RetainFinished, QueuedThreads:
// what runner's sweeper calls each interval; its TrimRuns runs once a
// minute, so it is left out) with no finished run present, and with
// -sweep-nodes finished nodes present (copies of a finished run of k
// nodes, made with DUMP and RESTORE, listed in the run index as submitted
// runs are).
func (b *bench) sweep(ctx context.Context, out io.Writer, rep report) error {
	type cost struct{ wall, cpu, calls float64 }
	const passes = 1000
	st := fence.New(b.t.rdb, nil)
	measure := func() (cost, error) {
		if err := st.Load(ctx); err != nil {
			return cost{}, err
		}
		opts := fence.SweepOptions{Grace: time.Second, Threshold: 15 * time.Second, Limit: 200, Retry: 5 * time.Second}
		var walls []float64
		s0, err := b.t.serverStats(ctx)
		if err != nil {
			return cost{}, err
		}
		for range passes {
			t0 := time.Now()
			if _, err := st.Sweep(ctx, opts); err != nil {
				return cost{}, err
			}
			if _, err := st.RetainFinished(ctx, runner.DefaultRetention, 200); err != nil {
				return cost{}, err
			}
			if _, err := st.QueuedThreads(ctx, 15*time.Second, 5*time.Second, 200); err != nil {
				return cost{}, err
			}
			walls = append(walls, float64(time.Since(t0)))
		}
		s1, err := b.t.serverStats(ctx)
		if err != nil {
			return cost{}, err
		}
		d := s1.since(s0)
		return cost{wall: medianF(walls), cpu: us(d.cpu) / passes, calls: float64(d.calls-1) / passes}, nil
	}
	if err := b.t.flush(ctx); err != nil {
		return err
	}
	empty, err := measure()
	if err != nil {
		return err
	}
	present := 0
	if b.o.sweepNodes > 0 {
		if present, err = b.fillFinished(ctx, b.o.sweepNodes); err != nil {
			return err
		}
	}
	// Right after the copies, the same passes cost Redis up to twice as
	// much CPU for a few seconds, whatever the sweep reads (Redis taking
	// in a gigabyte; its idle CPU does not show it). The passes go on in
	// blocks until their cost stops falling: the median of the last
	// settleBlocks blocks less than 5% below that of the settleBlocks
	// before (or settleFor has passed).
	const settleBlocks, settleFor = 5, time.Minute
	begin := time.Now()
	var blocks []cost
	var full cost
	for {
		c, err := measure()
		if err != nil {
			return err
		}
		blocks = append(blocks, c)
		if n := len(blocks); n >= 2*settleBlocks {
			last, before := blocks[n-settleBlocks:], blocks[n-2*settleBlocks:n-settleBlocks]
			full = cost{wall: medianF(field(last, func(c cost) float64 { return c.wall })),
				cpu: medianF(field(last, func(c cost) float64 { return c.cpu })), calls: last[len(last)-1].calls}
			if full.cpu >= 0.95*medianF(field(before, func(c cost) float64 { return c.cpu })) || time.Since(begin) > settleFor {
				break
			}
		}
	}
	settled := time.Since(begin)
	if err := b.t.flush(ctx); err != nil {
		return err
	}
	first := blocks[0]
	fmt.Fprintf(out, "\nsweep pass (median of %d): no finished nodes: %.0f µs wall, %.1f µs Redis CPU, %.1f Redis commands; "+
		"%d finished nodes present: %.0f µs wall, %.1f µs Redis CPU, %.1f Redis commands (Redis CPU ×%.2f)\n",
		passes, empty.wall/1e3, empty.cpu, empty.calls, present, full.wall/1e3, full.cpu, full.calls, full.cpu/empty.cpu)
	fmt.Fprintf(out, "           the last %d of %d blocks of %d passes (%s); the first, at once after the copies: "+
		"%.0f µs wall, %.1f µs Redis CPU (×%.2f)\n",
		settleBlocks, len(blocks), passes, settled.Round(time.Second), first.wall/1e3, first.cpu, first.cpu/empty.cpu)
	rep["sweep"] = map[string]any{"finished_nodes": present, "empty_wall_us": round1(empty.wall / 1e3),
		"empty_redis_cpu_us": round1(empty.cpu), "full_wall_us": round1(full.wall / 1e3),
		"full_redis_cpu_us": round1(full.cpu), "redis_cpu_ratio": round2(full.cpu / empty.cpu),
		"first_redis_cpu_us": round1(first.cpu), "first_redis_cpu_ratio": round2(first.cpu / empty.cpu),
		"settle_s": round1(settled.Seconds())}
	return nil
}

// field is f of each of xs.
func field[T any](xs []T, f func(T) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// fillFinished makes n finished nodes: one finished run of k nodes, then
// copies of its packed key under new run ids. It returns the nodes present.
func (b *bench) fillFinished(ctx context.Context, n int) (int, error) {
	const tag = "sw"
	if _, err := b.finish(ctx, tag, b.o.k, b.o.k); err != nil {
		return 0, err
	}
	keys := fence.Keys{}
	src := runID(tag, 0)
	type part struct {
		key  func(id string) string
		dump string
		pttl int64
	}
	// The run SUCCEEDED: its retention packed it into one key.
	parts := []*part{{key: func(id string) string { return keys.Packed(id, id) }}}
	for _, p := range parts {
		var err error
		if p.dump, err = b.t.raw.Dump(ctx, p.key(src)).Result(); err != nil {
			return 0, fmt.Errorf("dump %s: %w", p.key(src), err)
		}
		if p.pttl, err = b.t.raw.Do(ctx, "PTTL", p.key(src)).Int64(); err != nil {
			return 0, err
		}
		p.pttl = max(p.pttl, 0)
	}
	runs := max(n/b.o.k, 1) // the source and runs-1 copies
	const batch = 500
	now := float64(time.Now().UnixMilli())
	for lo := 1; lo < runs; lo += batch {
		pipe := b.t.raw.Pipeline()
		for i := lo; i < min(lo+batch, runs); i++ {
			id := runID(tag, i)
			for _, p := range parts {
				pipe.RestoreReplace(ctx, p.key(id), time.Duration(p.pttl)*time.Millisecond, p.dump)
			}
			pipe.ZAdd(ctx, keys.Runs(fence.ShardOf(id)), redis.Z{Score: now, Member: id})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, fmt.Errorf("copy finished runs: %w", err)
		}
	}
	return runs * b.o.k, nil
}

// reloaded reads every key of the bench's database (DUMP, with its time to
// live), empties the database and stores them again, and returns the
// used_memory they then take: the memory of what the keys hold now, not
// of the keyspace tables grown for keys deleted since (deleting two of a
// run's three keys leaves Redis's key tables sized for all three).
func (b *bench) reloaded(ctx context.Context) (int64, error) {
	type dumped struct {
		key, val string
		ttl      time.Duration
	}
	var all []dumped
	iter := b.t.raw.Scan(ctx, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		v, err := b.t.raw.Dump(ctx, k).Result()
		if err == redis.Nil {
			continue // gone since the scan
		}
		if err != nil {
			return 0, err
		}
		ttl, err := b.t.raw.PTTL(ctx, k).Result()
		if err != nil {
			return 0, err
		}
		all = append(all, dumped{k, v, max(ttl, 0)})
	}
	if err := iter.Err(); err != nil {
		return 0, err
	}
	if err := b.t.flush(ctx); err != nil {
		return 0, err
	}
	m0, err := b.t.usedMemory(ctx)
	if err != nil {
		return 0, err
	}
	pipe := b.t.raw.Pipeline()
	for i, d := range all {
		pipe.Restore(ctx, d.key, d.ttl, d.val)
		if i%1000 == 999 || i == len(all)-1 {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, fmt.Errorf("restore: %w", err)
			}
		}
	}
	m1, err := b.t.usedMemory(ctx)
	return m1 - m0, err
}
