package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// approvalOutcome is what the approval story saw.
type approvalOutcome struct {
	Run    string
	NS     string // the graph's checkpoints
	WaitNS string // the request the kind saved as it parked
	Ran    []string
	// Parked is the node while it waited, RunWhileParked its run's status
	// then, and Request the node's wait request, decoded.
	Parked         fence.NodeInfo
	RunWhileParked string
	Request        Request
	// Answer is the resume's value; Resumed what the resume returned and
	// Again what a second resume of the same wait, with another value,
	// returned.
	Answer         json.RawMessage
	Resumed, Again fence.Resumed
	Status         string // the run's, at the end
	Result         Essay  // the node's
}

// check returns an error unless the node parked holding nothing, the
// answer reached the graph, the graph went on from its checkpoint, and a
// second resume changed nothing.
func (o *approvalOutcome) check() error {
	var errs []error
	if o.Parked.State != "WAITING" || o.Parked.LeaseUntil != nil {
		errs = append(errs, fmt.Errorf("parked node: state %s, lease until %v", o.Parked.State, o.Parked.LeaseUntil))
	}
	if o.Parked.Attempt != o.Parked.Releases {
		errs = append(errs, fmt.Errorf("parked node: %d attempts, %d released: the wait was counted", o.Parked.Attempt, o.Parked.Releases))
	}
	if len(o.Request.Interrupts) != 1 {
		errs = append(errs, fmt.Errorf("request: %d interrupts, want 1", len(o.Request.Interrupts)))
	}
	if o.Status != "SUCCEEDED" {
		errs = append(errs, fmt.Errorf("run %s is %s", o.Run, o.Status))
	}
	var want Decision
	_ = json.Unmarshal(o.Answer, &want)
	if o.Result.Decision == nil || *o.Result.Decision != want {
		errs = append(errs, fmt.Errorf("the graph's decision is %+v, the answer was %s", o.Result.Decision, o.Answer))
	}
	if n := strings.Count(strings.Join(o.Ran, "\n"), "draft by"); n != 1 {
		errs = append(errs, fmt.Errorf("draft ran %d times: the graph did not resume from its checkpoint", n))
	}
	var first, again any
	_ = json.Unmarshal(o.Answer, &first)
	_ = json.Unmarshal(o.Again.Answer.Value, &again)
	if o.Resumed.Replay || !o.Again.Replay || !reflect.DeepEqual(first, again) {
		errs = append(errs, fmt.Errorf("resumes: first replay=%v, second replay=%v answer %s", o.Resumed.Replay, o.Again.Replay, o.Again.Answer.Value))
	}
	return errors.Join(errs...)
}

// approvalDemo runs the approval story on rdb and prints it to out:
// worker-a runs the graph until approve asks a person and the node parks;
// worker-a shuts down and worker-b starts; a person answers through
// Client.Resume; worker-b resumes the graph from the checkpoint with the
// answer and finishes; a second resume returns the first answer.
func approvalDemo(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, out io.Writer) (*approvalOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	if err != nil {
		return nil, err
	}
	defer c.Close()

	o := &approvalOutcome{Run: "approval-" + fence.NewClaimID()[:8],
		Answer: json.RawMessage(`{"approved": true, "note": "ship it"}`)}
	o.NS, _ = Namespace(o.Run + ".publish")
	o.WaitNS, _ = WaitNamespace(o.Run + ".publish")
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

	a, err := startWorker(ctx, rdb, log, "worker-a", record, nil)
	if err != nil {
		return nil, err
	}
	defer a.Shutdown()
	say("run %s: one node, an Eino graph draft → approve → publish that asks a person; checkpoints in %s", o.Run, o.NS)
	if _, err := c.Submit(ctx, &runner.RunSpec{ID: o.Run, Nodes: []runner.NodeSpec{{ID: "publish", Kind: "approval",
		Queue: queue, Input: json.RawMessage(`{"topic": "fencing tokens"}`)}}}); err != nil {
		return nil, err
	}
	n, err := waitNode(ctx, c, o.Run, "publish", "WAITING")
	if err != nil {
		return nil, err
	}
	o.Parked = *n
	if n.Wait == nil {
		return nil, fmt.Errorf("node %s/publish is WAITING without a wait", o.Run)
	}
	if err := json.Unmarshal(n.Wait.Request, &o.Request); err != nil {
		return nil, fmt.Errorf("wait request: %w", err)
	}
	info, err := c.Status(ctx, o.Run)
	if err != nil {
		return nil, err
	}
	o.RunWhileParked = info.Status
	lease := "no lease"
	if n.LeaseUntil != nil {
		lease = "lease until " + n.LeaseUntil.String()
	}
	say("  ...   the node parks: %s, %s, run %s; it asks %s", n.State, lease, info.Status, n.Wait.Request)

	a.Shutdown()
	b, err := startWorker(ctx, rdb, log, "worker-b", record, nil)
	if err != nil {
		return nil, err
	}
	defer b.Shutdown()
	say("  ...   worker-a shuts down, worker-b starts; a person answers %s", o.Answer)
	if o.Resumed, err = c.Resume(ctx, o.Run, "publish", "", o.Answer); err != nil {
		return nil, err
	}
	info, err = c.Wait(ctx, o.Run)
	if err != nil {
		return nil, err
	}
	o.Status = info.Status
	if len(info.Nodes) == 1 && len(info.Nodes[0].Result) > 0 {
		if err := json.Unmarshal(info.Nodes[0].Result, &o.Result); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
	}
	if o.Again, err = c.Resume(ctx, o.Run, "publish", n.Wait.ID, json.RawMessage(`{"approved": false, "note": "too late"}`)); err != nil {
		return nil, err
	}
	say("  ...   a second answer to the same wait changes nothing: already=%v, the answer stands: %s", o.Again.Replay, o.Again.Answer.Value)
	if err := timeline(ctx, c, o.Run, say); err != nil {
		return nil, err
	}
	say("result: %s (%s)", strings.Join(o.Result.Trail, ", "), o.Status)
	return o, nil
}

// waitNode polls the run until its node is in state.
func waitNode(ctx context.Context, c *runner.Client, run, node, state string) (*fence.NodeInfo, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := c.Status(ctx, run)
		if err != nil {
			return nil, err
		}
		for i := range info.Nodes {
			if info.Nodes[i].ID == node && info.Nodes[i].State == state {
				return &info.Nodes[i], nil
			}
		}
		if client.State(info.Status).Ended() {
			return nil, fmt.Errorf("run %s ended %s before node %s was %s", run, info.Status, node, state)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s/%s %s: %w", run, node, state, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
