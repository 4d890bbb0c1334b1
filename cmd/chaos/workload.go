package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/chaos/check"
	"github.com/batonrun/baton/runner"
)

// workload is the runs the harness submits: DAGs of exec, http and sleep
// nodes in chains, fan-outs and fan-ins, some with a single attempt, so that
// every fault meets nodes in every phase.
type workload struct {
	client *runner.Client
	queue  *asynq.Client
	log    *slog.Logger
	specs  []*runner.RunSpec
	rng    *rand.Rand // duplicate picks; guarded by mu

	mu       sync.Mutex
	accepted []string
	refused  map[string]string // run id -> why a submit of its spec was refused for good
	extra    []*runner.RunSpec // runs the conversations submitted (threads.go)
}

func newWorkload(rdb redis.UniversalClient, seed uint64, runs int, downstream string, log *slog.Logger) (*workload, error) {
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, seed^0xda6))
	w := &workload{client: c, queue: asynq.NewClientFromRedisClient(rdb), log: log, refused: map[string]string{},
		rng: rand.New(rand.NewPCG(seed, seed^0xd0b))}
	for i := range runs {
		w.specs = append(w.specs, makeSpec(rng, fmt.Sprintf("chaos-%d-%03d", seed, i), downstream))
	}
	return w, nil
}

func (w *workload) close() {
	_ = w.client.Close()
	_ = w.queue.Close()
}

// makeSpec draws one run: a chain, a fan-out/fan-in, a diamond with a tail,
// or one long node that must live through many heartbeats.
func makeSpec(rng *rand.Rand, id, downstream string) *runner.RunSpec {
	s := &runner.RunSpec{ID: id}
	node := func(name string, deps ...string) {
		n := runner.NodeSpec{ID: name, Deps: deps}
		var input any
		switch k := rng.IntN(10); {
		case k < 4:
			n.Kind = "exec"
			ms := 50 + rng.IntN(600)
			input = map[string]any{"command": []string{"sh", "-c",
				fmt.Sprintf(`sleep %d.%03d; echo '{"node":"%s"}'`, ms/1000, ms%1000, name)}}
		case k < 7:
			n.Kind = "http"
			n.MaxAttempts = 5 // a 503 while Redis restarts is a retry, not the end
			input = map[string]any{"url": "http://" + downstream + "/notify", "timeout": "3s",
				"body": map[string]string{"run": id, "node": name}}
		default:
			n.Kind = "sleep"
			input = map[string]any{"duration": fmt.Sprintf("%dms", 100+rng.IntN(1900))}
		}
		if n.Kind != "http" && rng.IntN(4) == 0 {
			n.MaxAttempts = 1
		}
		n.Input, _ = json.Marshal(input)
		s.Nodes = append(s.Nodes, n)
	}
	switch rng.IntN(4) {
	case 0: // chain
		prev := ""
		for i := range 3 + rng.IntN(3) {
			name := fmt.Sprintf("c%d", i)
			if prev == "" {
				node(name)
			} else {
				node(name, prev)
			}
			prev = name
		}
	case 1: // fan-out, fan-in
		node("root")
		var mids []string
		for i := range 2 + rng.IntN(3) {
			mids = append(mids, fmt.Sprintf("m%d", i))
			node(mids[i], "root")
		}
		node("join", mids...)
	case 2: // diamond with a tail
		node("a")
		node("b", "a")
		node("c", "a")
		node("d", "b", "c")
		node("e", "d")
	default: // one long node: many heartbeats, one attempt
		s.Nodes = append(s.Nodes, runner.NodeSpec{ID: "long", Kind: "sleep", MaxAttempts: 1,
			Input: json.RawMessage(fmt.Sprintf(`{"duration":"%dms"}`, 2000+rng.IntN(3000)))})
	}
	return s
}

// submitAll submits the runs spread over the window. A submit that failed
// (Redis down) is retried with the same id: submitting the same spec again
// is a no-op, so a retry never makes a second run.
func (w *workload) submitAll(ctx context.Context, window time.Duration) {
	start := time.Now()
	gap := window * 8 / 10 / time.Duration(max(len(w.specs), 1))
	for i, spec := range w.specs {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(time.Duration(i) * gap))):
		}
		for ctx.Err() == nil {
			sub, err := w.client.Submit(ctx, spec)
			if err == nil || sub.RunID != "" { // stored; an enqueue error is the sweeper's to repair
				w.mu.Lock()
				w.accepted = append(w.accepted, spec.ID)
				w.mu.Unlock()
				break
			}
			if errors.Is(err, runner.ErrInvalidSpec) || errors.Is(err, fence.ErrRunConflict) || errors.Is(err, fence.ErrThreadBusy) {
				// Only ever this run's one spec is submitted: no retry can
				// make a refusal right.
				w.log.Error("submit_refused", "run_id", spec.ID, "err", err)
				w.mu.Lock()
				w.refused[spec.ID] = err.Error()
				w.mu.Unlock()
				break
			}
			w.log.Warn("submit_retry", "run_id", spec.ID, "err", err)
			time.Sleep(300 * time.Millisecond) // Redis is restarting
		}
	}
}

// addRun counts a run another part of the workload (the conversations)
// had accepted.
func (w *workload) addRun(spec *runner.RunSpec) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.accepted = append(w.accepted, spec.ID)
	w.extra = append(w.extra, spec)
}

// Accepted returns the ids of the runs whose submit was accepted.
func (w *workload) Accepted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.accepted...)
}

// Refused returns the runs whose submit was refused for good, with why.
func (w *workload) Refused() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.refused)
}

// dependents maps run -> node -> its direct dependents, for the checker.
func (w *workload) dependents() map[string]map[string][]string {
	out := map[string]map[string][]string{}
	w.mu.Lock()
	specs := append(slices.Clone(w.specs), w.extra...)
	w.mu.Unlock()
	for _, s := range specs {
		m := map[string][]string{}
		for _, n := range s.Nodes {
			for _, d := range n.Deps {
				m[d] = append(m[d], n.ID)
			}
		}
		out[s.ID] = m
	}
	return out
}

// duplicate enqueues an extra Asynq task for a live (READY or RUNNING) node
// under a new task id, as a redelivery would: delivery is a trigger, and the
// claim must refuse or take it as the protocol says. It returns the node.
func (w *workload) duplicate(ctx context.Context, n int) (string, bool) {
	acc := w.Accepted()
	if len(acc) == 0 {
		return "", false
	}
	w.mu.Lock()
	first := w.rng.IntN(len(acc))
	w.mu.Unlock()
	for i := range acc {
		id := acc[(first+i)%len(acc)]
		info, err := w.client.Status(ctx, id)
		if err != nil {
			continue
		}
		for _, nd := range info.Nodes {
			if nd.State != "RUNNING" && nd.State != "READY" {
				continue
			}
			// The payload is the task payload of internal/delivery (task.go): which
			// node to claim, nothing more.
			b, _ := json.Marshal(map[string]string{"thread": cmp.Or(info.Thread, info.ID), "run": info.ID, "node": nd.ID})
			_, err := w.queue.EnqueueContext(ctx, asynq.NewTask(runner.TaskType, b),
				asynq.TaskID(fmt.Sprintf("chaos-dup-%d-%s-%s", n, info.ID, nd.ID)), asynq.Queue(runner.DefaultQueue))
			if err != nil {
				w.log.Warn("duplicate_enqueue_failed", "err", err)
				return "", false
			}
			return info.ID + "/" + nd.ID, true
		}
	}
	return "", false
}

// waitTerminal polls the accepted runs until every one is terminal or the
// deadline passes.
func (w *workload) waitTerminal(ctx context.Context, deadline time.Time) (open int) {
	for {
		open = 0
		for _, id := range w.Accepted() {
			info, err := w.client.Status(ctx, id)
			if err != nil || !terminal(info.Status) {
				open++
			}
		}
		if open == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return open
		}
		time.Sleep(250 * time.Millisecond) // polling the runs under test
	}
}

func terminal(s string) bool { return s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLED" }

// final reads every accepted run with its events back from Redis, and the
// runs in also (whose submit was refused: found, they are a violation).
func (w *workload) final(ctx context.Context, also []string) map[string]check.RunFinal {
	out := map[string]check.RunFinal{}
	accepted := w.Accepted()
	for i, id := range append(accepted, also...) {
		if _, ok := out[id]; ok {
			continue
		}
		var f check.RunFinal
		f.Info, f.Err = w.client.Status(ctx, id)
		if f.Err == nil {
			f.Events, f.Err = w.client.Events(ctx, id, "", 0)
		}
		if f.Err != nil && !errors.Is(f.Err, fence.ErrNotFound) {
			f.Err = fmt.Errorf("reading it failed: %w", f.Err)
		}
		if i >= len(accepted) && f.Info == nil {
			continue // refused and not stored, as it should be
		}
		out[id] = f
	}
	return out
}
