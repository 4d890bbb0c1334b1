package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// cancelRow is the cancel latency of one node kind.
type cancelRow struct {
	kind string
	lat  []time.Duration // cancel call to run CANCELLED, sorted
}

func (r cancelRow) quantile(q float64) time.Duration {
	return r.lat[min(len(r.lat)-1, int(q*float64(len(r.lat))))]
}

// cancelBench measures how long a cancel takes to end a running node: for
// each of o.cancels one-node runs per kind it waits until the node runs,
// cancels the run through runner.Client, and polls the run until it is
// CANCELLED. The worker keeps its default lease (30s, renewed every 10s),
// so a cancel that waited for a heartbeat would take seconds.
type cancelBench struct {
	o       options
	t       *target
	log     *slog.Logger // the worker's
	started chan string  // run ids whose Go handler runs
	causes  chan error   // why each Go handler stopped
}

// The kinds measured: a Go handler blocked until its context ends, and an
// exec node (sh, then sleep) whose process group gets SIGTERM.
const (
	cancelGo   = "go"
	cancelExec = "exec"
)

func (c *cancelBench) run(ctx context.Context) ([]cancelRow, error) {
	if err := c.t.flush(ctx); err != nil {
		return nil, err
	}
	cli, err := runner.NewClient(runner.ClientConfig{Redis: c.t.rdb})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: c.t.rdb, ID: "bench-worker",
		Concurrency: c.o.concurrency, PollInterval: c.o.poll, Logger: c.log})
	if err != nil {
		return nil, err
	}
	c.started, c.causes = make(chan string, 1), make(chan error, 1)
	w.Register(cancelGo, runner.KindFunc(c.block))
	w.Register(cancelExec, kinds.Exec(kinds.ExecOptions{}))
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	defer w.Shutdown()

	var rows []cancelRow
	for _, kind := range []string{cancelGo, cancelExec} {
		row := cancelRow{kind: kind}
		for i := range c.o.cancels {
			d, err := c.one(ctx, cli, kind, fmt.Sprintf("cancel-%s-%04d", kind, i))
			if err != nil {
				return nil, fmt.Errorf("cancel %s %d: %w", kind, i, err)
			}
			row.lat = append(row.lat, d)
		}
		slices.Sort(row.lat)
		rows = append(rows, row)
	}
	return rows, nil
}

func (c *cancelBench) block(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	c.started <- t.Lease.Run
	<-ctx.Done()
	c.causes <- context.Cause(ctx)
	return nil, context.Cause(ctx)
}

// one submits a run of one node of kind, waits until it runs, cancels it
// and returns how long the cancel took to end the run.
func (c *cancelBench) one(ctx context.Context, cli *runner.Client, kind, id string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout)
	defer cancel()
	node := runner.NodeSpec{ID: "n", Kind: kind}
	if kind == cancelExec {
		// The progress line says the command runs (progress is stored at once).
		node.Input = json.RawMessage(`{"command":["sh","-c","echo ::progress 1; exec sleep 600"]}`)
	}
	if _, err := cli.Submit(ctx, &runner.RunSpec{ID: id, Nodes: []runner.NodeSpec{node}}); err != nil {
		return 0, err
	}
	keys := cli.Store().Keys()
	switch kind {
	case cancelGo:
		select {
		case got := <-c.started:
			if got != id {
				return 0, fmt.Errorf("handler of %s started, want %s", got, id)
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("node never started: %w", context.Cause(ctx))
		}
	case cancelExec:
		if err := c.poll(ctx, keys.Node(id, id, "n"), "progress", "1"); err != nil {
			return 0, fmt.Errorf("command never started: %w", err)
		}
	}

	start := time.Now()
	if _, err := cli.Cancel(ctx, id, "bench"); err != nil {
		return 0, err
	}
	if err := c.poll(ctx, keys.Run(id, id), "status", "CANCELLED"); err != nil {
		return 0, fmt.Errorf("run never CANCELLED: %w", err)
	}
	d := time.Since(start)
	if kind == cancelGo {
		if cause := <-c.causes; !errors.Is(cause, runner.ErrRunCancelled) {
			return 0, fmt.Errorf("handler stopped by %v, not by the cancel", cause)
		}
	}
	return d, nil
}

// poll reads a hash field every millisecond (on the bench's own, uncounted
// connection) until it holds want.
func (c *cancelBench) poll(ctx context.Context, key, field, want string) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		v, err := c.t.raw.HGet(ctx, key, field).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		if v == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s is %q, want %q: %w", key, field, v, want, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func printCancels(w io.Writer, rows []cancelRow) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cancel\tnodes\tp50\tp99\tmax\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", r.kind, len(r.lat),
			ms(r.quantile(0.50)), ms(r.quantile(0.99)), ms(r.lat[len(r.lat)-1]))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, `
cancel     from runner.Client.Cancel on a running node to its run being CANCELLED
           (polled every 1 ms), one cancel at a time, under the default lease (30s,
           renewed every 10s): go = a Go handler waiting on its context, exec = sh
           then sleep, whose process group gets SIGTERM`)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }
