// Command eino runs an Eino graph as a baton node kind, with the graph's
// checkpoints in baton's fenced checkpoint store. Worker A runs the first
// step, saves a checkpoint, and stalls inside the second step as a paused
// process would. Its lease runs out and worker B takes the node over: B's
// graph resumes from A's checkpoint instead of starting again, and
// finishes. Then A wakes up, its graph reaches the next save point, and its
// checkpoint is refused.
//
//	cd examples/eino && REDIS_URL=redis://127.0.0.1:6379/0 go run .
//
// Then a second story (approval_story.go): a graph whose approve node asks
// a person with compose.Interrupt parks its node, holding no worker; a
// worker restarts; the answer, given with Client.Resume, reaches the node
// through Eino's resume data, and the run finishes.
//
// It exits 1 if B started from scratch, A's late checkpoint was stored, or
// the approval did not round-trip.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb, err := runner.OpenRedis(cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer rdb.Close()
	o, err := demo(ctx, rdb, log, os.Stdout)
	if err == nil {
		err = o.check()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eino demo:", err)
		os.Exit(1)
	}
	fmt.Println()
	a, err := approvalDemo(ctx, rdb, log, os.Stdout)
	if err == nil {
		err = a.check()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "eino approval demo:", err)
		os.Exit(1)
	}
}

// queue is the Asynq queue the demo's node and workers use, so that other
// workers on the same Redis never receive a node of a kind they lack.
const queue = "eino"

// outcome is what the demo saw.
type outcome struct {
	Run string
	NS  string // the baton namespace holding the graph's checkpoints
	// Ran lists every step as it started, in order: "draft by worker-a
	// (epoch 1)".
	Ran    []string
	Status string // the run's
	Result Essay  // the node's
	// LateSet is what worker A's graph returned once it woke up and tried
	// to save a checkpoint under its lost lease.
	LateSet error
	// Before and After are the newest checkpoint before A woke up and after
	// its late save.
	Before, After *fence.Checkpoint
}

// check returns an error unless B resumed from A's checkpoint and A's late
// save changed nothing.
func (o *outcome) check() error {
	var errs []error
	if o.Status != "SUCCEEDED" {
		errs = append(errs, fmt.Errorf("run %s is %s", o.Run, o.Status))
	}
	if slices.ContainsFunc(o.Ran, func(s string) bool { return strings.HasPrefix(s, "outline by worker-b") }) {
		errs = append(errs, errors.New("worker-b ran the graph from scratch"))
	}
	if !fence.IsFenced(o.LateSet) {
		errs = append(errs, fmt.Errorf("worker-a's late checkpoint was not refused: %v", o.LateSet))
	}
	if o.Before == nil || o.After == nil || o.After.Version != o.Before.Version {
		errs = append(errs, errors.New("worker-a's late checkpoint changed the newest one"))
	}
	return errors.Join(errs...)
}

// demo runs the story on rdb and prints it to out.
func demo(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, out io.Writer) (*outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	if err != nil {
		return nil, err
	}
	defer c.Close()

	o := &outcome{Run: "eino-" + fence.NewClaimID()[:8]}
	o.NS, _ = Namespace(o.Run + ".write") // the kind's default checkpoint id
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
	record := func(ctx context.Context, step string) {
		s := ranBy(ctx, step)
		mu.Lock()
		o.Ran = append(o.Ran, s)
		mu.Unlock()
		say("  step  %s", s)
	}

	// Worker A stalls inside "draft" as a process stopped by SIGSTOP or a
	// long GC pause would, and its handler ignores its context, as a frozen
	// process does: when it wakes, its next write reaches Redis before it
	// learns that it lost the node. Only the fence stops that write.
	stalled, wake := make(chan struct{}), make(chan struct{})
	wakeA := sync.OnceFunc(func() { close(wake) })
	lateSet := make(chan error, 1)
	a, err := startWorker(ctx, rdb, log, "worker-a", func(ctx context.Context, step string) {
		record(ctx, step)
		if step == "draft" {
			close(stalled)
			<-wake
		}
	}, func(k runner.Kind) runner.Kind {
		return runner.KindFunc(func(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
			res, err := k.Run(context.WithoutCancel(ctx), t)
			lateSet <- err
			return res, err
		})
	})
	if err != nil {
		return nil, err
	}
	defer a.Shutdown()
	defer wakeA() // first, on an early return too: A's handler must not stay blocked

	say("run %s: one node, an Eino graph outline → draft → review; checkpoints in namespace %s", o.Run, o.NS)
	if _, err := c.Submit(ctx, &runner.RunSpec{ID: o.Run, Nodes: []runner.NodeSpec{{ID: "write", Kind: "essay",
		Queue: queue, Input: json.RawMessage(`{"topic": "fencing tokens"}`)}}}); err != nil {
		return nil, err
	}
	select {
	case <-stalled:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for worker-a to reach draft: %w", context.Cause(ctx))
	}
	say("  ...   worker-a stalls inside draft; its heartbeats stop (killed), its handler runs on")
	a.Kill()

	b, err := startWorker(ctx, rdb, log, "worker-b", record, nil)
	if err != nil {
		return nil, err
	}
	defer b.Shutdown()
	info, err := c.Wait(ctx, o.Run)
	if err != nil {
		return nil, err
	}
	o.Status = info.Status
	if len(info.Nodes) == 1 && len(info.Nodes[0].Result) > 0 {
		if err := json.Unmarshal(info.Nodes[0].Result, &o.Result); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
	}
	if o.Before, err = c.LatestCheckpoint(ctx, o.Run, o.NS); err != nil {
		return nil, err
	}

	say("  ...   worker-a wakes up; its graph finishes draft and saves a checkpoint")
	wakeA()
	select {
	case o.LateSet = <-lateSet:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for worker-a's graph: %w", context.Cause(ctx))
	}
	say("  ...   worker-a's graph stops: %v", o.LateSet)
	if o.After, err = c.LatestCheckpoint(ctx, o.Run, o.NS); err != nil {
		return nil, err
	}
	if err := timeline(ctx, c, o.Run, say); err != nil {
		return nil, err
	}
	say("result: %s (%s)", strings.Join(o.Result.Trail, ", "), o.Status)
	return o, nil
}

// startWorker starts a worker that runs the essay and approval kinds from
// queue, with leases short enough to watch one expire. wrap, when set,
// wraps the essay kind.
func startWorker(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, id string,
	hook stepHook, wrap func(runner.Kind) runner.Kind) (*runner.Worker, error) {
	graph, err := newGraph(ctx, CheckPointStore{}, hook)
	if err != nil {
		return nil, err
	}
	approval, err := newApprovalGraph(ctx, CheckPointStore{}, hook)
	if err != nil {
		return nil, err
	}
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, ID: id, Logger: log, Concurrency: 2,
		Queues: map[string]int{queue: 1}, LeaseTTL: time.Second, HeartbeatInterval: 250 * time.Millisecond,
		Grace: 100 * time.Millisecond, SweepInterval: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond,
		RetryBase: 50 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	var k runner.Kind = graphKind{graph: graph}
	if wrap != nil {
		k = wrap(k)
	}
	w.Register("essay", k)
	w.Register("approval", graphKind{graph: approval})
	return w, w.Start(ctx)
}

// timeline prints the run's events.
func timeline(ctx context.Context, c *runner.Client, run string, say func(string, ...any)) error {
	evs, err := c.Events(ctx, run, "", 0)
	if err != nil {
		return err
	}
	say("timeline:")
	for _, e := range evs {
		epoch := "-"
		if e.Epoch > 0 {
			epoch = fmt.Sprintf("e%d", e.Epoch)
		}
		say("%s", strings.TrimRight(fmt.Sprintf("  %+7.3fs  %-9s %-3s %-15s %s",
			e.At.Sub(evs[0].At).Seconds(), cmp.Or(e.Worker, "-"), epoch, e.Type, details(e)), " "))
	}
	return nil
}

// details picks the event fields worth a timeline column.
func details(e fence.Event) string {
	var parts []string
	for _, k := range []string{"attempt", "prev_owner", "op", "current_epoch", "ns", "version", "wait_id", "status"} {
		if v := e.Details[k]; v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}
