package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/chaos/agent"
	"github.com/batonrun/baton/internal/chaos/check"
	"github.com/batonrun/baton/runner"
)

// Checkpoint namespaces of the conversation runs: the Go node's and the
// exec node's (an exec node's namespace is its node id).
const (
	nsThink = "think"
	nsTool  = "tool"
)

var strategies = []string{"reject", "enqueue", "interrupt", "rollback"}

// conversations is the thread workload: a few threads, each a
// conversation that submits runs with every multitask strategy (and, once
// per thread, a run without a thread whose id is the thread's), cancels
// some, and whose nodes, a Go step (agent.Run) and an exec step
// (agent.ExecCommand), save a checkpoint every step. It records what the
// thread checks need: each submit's and cancel's answer, and the threads'
// checkpoints, sampled while the runs go and read in full at the end.
type conversations struct {
	client  *runner.Client
	log     *slog.Logger
	seed    uint64
	threads []string
	onRun   func(spec *runner.RunSpec) // an accepted run joins the workload's

	mu      sync.Mutex
	submits []check.Submit
	cancels []check.CancelOp
	seen    []check.SeenCheckpoint
	seenIDs map[string]bool // thread/ns/version/id read already
	final   []check.ThreadNS
	specs   []*runner.RunSpec // accepted
}

func newConversations(client *runner.Client, seed uint64, threads int, log *slog.Logger,
	onRun func(*runner.RunSpec)) *conversations {
	c := &conversations{client: client, log: log, seed: seed, onRun: onRun, seenIDs: map[string]bool{}}
	for k := range threads {
		c.threads = append(c.threads, fmt.Sprintf("chaos-%d-t%d", seed, k))
	}
	return c
}

// run drives every conversation over the first 80% of the window.
func (c *conversations) run(ctx context.Context, window time.Duration) {
	until := time.Now().Add(window * 8 / 10)
	var wg sync.WaitGroup
	for k, t := range c.threads {
		wg.Add(1)
		go func() { defer wg.Done(); c.converse(ctx, k, t, until) }()
	}
	wg.Wait()
}

// startSampling samples the threads' checkpoints (sample) until the
// function it returns is called; that waits for the sampler to stop.
func (c *conversations) startSampling(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.sample(ctx) }()
	return func() { cancel(); <-done }
}

// converse is one thread's conversation. Even threads open with a run
// without a thread (the thread of its own id); odd ones send one in the
// middle, which must wait its turn like any other run of the thread.
func (c *conversations) converse(ctx context.Context, k int, thread string, until time.Time) {
	rng := rand.New(rand.NewPCG(c.seed, c.seed^uint64(0x7e4d+k)))
	var mine []string // accepted runs, newest last
	for n := 0; time.Now().Before(until) && ctx.Err() == nil; n++ {
		if n > 0 {
			// Now and then a user sends messages in a burst: a rollback
			// and an interrupt queued behind one run, a cancel right
			// after a submit.
			gap := 150*time.Millisecond + time.Duration(rng.IntN(2200))*time.Millisecond
			if rng.IntN(4) == 0 {
				gap = time.Duration(rng.IntN(60)) * time.Millisecond
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(gap):
			}
		}
		if n > 1 && len(mine) > 0 && rng.IntN(7) == 0 {
			c.cancel(ctx, mine[max(0, len(mine)-1-rng.IntN(3)):][0])
			continue
		}
		spec := convSpec(rng, thread, n)
		if (k%2 == 0 && n == 0) || (k%2 == 1 && n == 4) {
			spec.ID, spec.Thread, spec.Multitask = thread, "", ""
		}
		if c.submit(ctx, spec) {
			mine = append(mine, spec.ID)
		}
	}
}

// convSpec draws one run of a conversation: a Go step then an exec step,
// either alone, or now and then a burst of Go saves past the history cap.
func convSpec(rng *rand.Rand, thread string, n int) *runner.RunSpec {
	s := &runner.RunSpec{ID: fmt.Sprintf("%s-%03d", thread, n), Thread: thread,
		Multitask: strategies[rng.IntN(len(strategies))]}
	think := func(in agent.Input) runner.NodeSpec {
		b, _ := json.Marshal(in)
		return runner.NodeSpec{ID: nsThink, Kind: agent.Kind, Queue: agent.Queue, Input: b, MaxAttempts: 4}
	}
	tool := func(deps ...string) runner.NodeSpec {
		cmd := agent.ExecCommand(agent.Input{NS: nsTool, Steps: 2 + rng.IntN(5), StepMS: 80 + rng.IntN(170)})
		b, _ := json.Marshal(map[string]any{"command": cmd})
		return runner.NodeSpec{ID: nsTool, Kind: "exec", Input: b, MaxAttempts: 4, Deps: deps}
	}
	step := agent.Input{NS: nsThink, Steps: 3 + rng.IntN(6), StepMS: 80 + rng.IntN(170)}
	switch k := rng.IntN(10); {
	case k < 5:
		s.Nodes = []runner.NodeSpec{think(step), tool(nsThink)}
	case k < 7:
		s.Nodes = []runner.NodeSpec{think(step)}
	case k < 9:
		s.Nodes = []runner.NodeSpec{tool()}
	default: // past the history cap: a rollback of it must still restore the state before it
		s.Nodes = []runner.NodeSpec{think(agent.Input{NS: nsThink, Steps: fence.DefaultCheckpointHistory + 5, StepMS: 2})}
	}
	return s
}

// submit submits spec until Redis answers, and records the answer. It
// reports whether the run was accepted.
func (c *conversations) submit(ctx context.Context, spec *runner.RunSpec) bool {
	for ctx.Err() == nil {
		rec := check.Submit{Run: spec.ID, Thread: spec.Thread, Strategy: spec.Multitask, Call: time.Now().UnixNano()}
		sub, err := c.client.Submit(ctx, spec)
		rec.Ret = time.Now().UnixNano()
		if err != nil {
			rec.Err = err.Error()
		}
		switch {
		case err == nil || sub.RunID != "":
			rec.Outcome, rec.Status, rec.Behind, rec.Created = check.SubmitAccepted, sub.Status, sub.Behind, sub.Created
		case errors.Is(err, fence.ErrThreadBusy):
			rec.Outcome = check.SubmitBusy
		case errors.Is(err, runner.ErrInvalidSpec) || errors.Is(err, fence.ErrRunConflict) ||
			errors.Is(err, fence.ErrInvalidData):
			rec.Outcome = check.SubmitRefused
			c.log.Error("thread_submit_refused", "run_id", spec.ID, "err", err)
		default:
			c.log.Warn("submit_retry", "run_id", spec.ID, "err", err)
			time.Sleep(300 * time.Millisecond) // Redis is restarting
			continue
		}
		c.mu.Lock()
		c.submits = append(c.submits, rec)
		if rec.Outcome == check.SubmitAccepted {
			c.specs = append(c.specs, spec)
		}
		c.mu.Unlock()
		if rec.Outcome == check.SubmitAccepted {
			c.onRun(spec)
		}
		return rec.Outcome == check.SubmitAccepted
	}
	return false
}

// cancel cancels a run as a user would, once; the answer is recorded.
func (c *conversations) cancel(ctx context.Context, run string) {
	rec := check.CancelOp{Run: run, Call: time.Now().UnixNano()}
	res, err := c.client.Cancel(ctx, run, "chaos: cancelled by the conversation")
	rec.Ret, rec.Status = time.Now().UnixNano(), res.RunStatus
	if err != nil {
		rec.Err = err.Error()
	}
	c.mu.Lock()
	c.cancels = append(c.cancels, rec)
	c.mu.Unlock()
}

// sample reads the newest checkpoints of every thread a few times a
// second, so that the data of checkpoints a rollback or the history cap
// removes later is known too.
func (c *conversations) sample(ctx context.Context) {
	for ctx.Err() == nil {
		for _, t := range c.threads {
			for _, ns := range []string{nsThink, nsTool} {
				list, _, err := c.client.Checkpoints(ctx, t, ns, 0, 40)
				if err == nil {
					c.note(list, false)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *conversations) note(list []fence.Checkpoint, final bool) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cp := range list {
		k := fmt.Sprintf("%s/%s/%d/%s", cp.Thread, cp.NS, cp.Version, cp.ID)
		if final {
			k += "/final"
		}
		if c.seenIDs[k] {
			continue
		}
		c.seenIDs[k] = true
		c.seen = append(c.seen, check.SeenCheckpoint{Checkpoint: cp, Seen: now, Final: final})
	}
}

// readFinal reads every checkpoint of every thread once all runs ended.
func (c *conversations) readFinal(ctx context.Context) error {
	var errs []error
	for _, t := range c.threads {
		for _, ns := range []string{nsThink, nsTool} {
			var all []fence.Checkpoint
			var before int64
			var err error
			for {
				var page []fence.Checkpoint
				page, before, err = c.client.Checkpoints(ctx, t, ns, before, 1000)
				all = append(all, page...)
				if err != nil || before == 0 {
					break
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("thread %s ns %s: %w", t, ns, err))
				continue
			}
			c.note(all, true)
			c.mu.Lock()
			c.final = append(c.final, check.ThreadNS{Thread: t, NS: ns})
			c.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// input is what the thread checks read.
func (c *conversations) input() *check.ThreadInput {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &check.ThreadInput{Submits: slices.Clone(c.submits), Cancels: slices.Clone(c.cancels),
		Checkpoints: slices.Clone(c.seen), Final: slices.Clone(c.final)}
}

// busyRuns are the runs whose submit was answered thread busy: read back
// to show that none was stored.
func (c *conversations) busyRuns() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.submits {
		if s.Outcome == check.SubmitBusy {
			out = append(out, s.Run)
		}
	}
	return out
}
