package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/batonrun/baton/runner"
)

// Essay is the state that flows through the graph. Every step appends who
// ran it to Trail, so a result shows which worker did which step.
type Essay struct {
	Topic string   `json:"topic"`
	Trail []string `json:"trail"`
	// Decision is a person's answer, in the approval graph.
	Decision *Decision `json:"decision,omitempty"`
}

// Eino's checkpoint serializer needs every type a checkpoint may hold
// registered under a stable name.
func init() { schema.RegisterName[*Essay]("baton_example_essay") }

// steps are the graph's nodes, in order: outline → draft → review.
var steps = []string{"outline", "draft", "review"}

// stepHook is called as each step starts, with the step's context (which
// carries the baton lease). main uses it to print the steps and to stall
// one worker inside a step; nil does nothing.
type stepHook func(ctx context.Context, step string)

// newGraph compiles the essay graph over store. It interrupts before every
// step but the first: Eino writes a checkpoint only when a graph
// interrupts, so each step boundary becomes a fenced save point.
func newGraph(ctx context.Context, store compose.CheckPointStore, hook stepHook) (compose.Runnable[*Essay, *Essay], error) {
	g := compose.NewGraph[*Essay, *Essay]()
	prev := compose.START
	for _, step := range steps {
		if err := g.AddLambdaNode(step, compose.InvokableLambda(stepFunc(step, hook))); err != nil {
			return nil, err
		}
		if err := g.AddEdge(prev, step); err != nil {
			return nil, err
		}
		prev = step
	}
	if err := g.AddEdge(prev, compose.END); err != nil {
		return nil, err
	}
	return g.Compile(ctx, compose.WithGraphName("essay"), compose.WithCheckPointStore(store),
		compose.WithInterruptBeforeNodes(steps[1:]))
}

// stepFunc is one deterministic step: it records who ran it.
func stepFunc(step string, hook stepHook) func(context.Context, *Essay) (*Essay, error) {
	return func(ctx context.Context, in *Essay) (*Essay, error) {
		if hook != nil {
			hook(ctx, step)
		}
		trail := append(append([]string{}, in.Trail...), ranBy(ctx, step))
		return &Essay{Topic: in.Topic, Trail: trail}, nil
	}
}

// ranBy names a step and the claim that ran it: "draft by worker-b (epoch 2)".
func ranBy(ctx context.Context, step string) string {
	l, _ := runner.LeaseFrom(ctx)
	return fmt.Sprintf("%s by %s (epoch %d)", step, l.Owner, l.Epoch)
}

// graphKind runs an Eino graph over Essays as a baton node kind (the
// essay graph, or the approval graph of approval.go). Input:
// {"topic": "...", "checkpoint_id": "..."}; checkpoint_id defaults to
// "<run>.<node>", so each node of each run has its own graph state, and any
// later attempt of the node, on any worker, resumes it.
//
// An interrupt before or after nodes (a save point, see newGraph) is
// resumed at once. An interrupt a node raises for a person
// (compose.Interrupt) parks the node (runner.Park) with what the node
// asked (Request): it holds no lease and no worker until someone resumes
// it. The attempt after the resume resumes the graph from its checkpoint,
// with the answer as Eino's resume data for that interrupt
// (compose.BatchResumeWithData; see resumeContext).
type graphKind struct {
	graph compose.Runnable[*Essay, *Essay]
}

// maxSavePoints bounds the save points one attempt passes: a graph that
// interrupts more often without asking anyone is in a loop.
const maxSavePoints = 64

func (k graphKind) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	var in struct {
		Topic        string `json:"topic"`
		CheckPointID string `json:"checkpoint_id"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil || in.Topic == "" {
		return nil, runner.Permanent(errors.New(`essay: input: want {"topic": "...", "checkpoint_id": "..."}`))
	}
	id := cmp.Or(in.CheckPointID, t.Lease.Run+"."+t.Lease.Node)
	ctx = WithTask(ctx, t) // the graph's CheckPointStore saves and reads as t
	first := ctx           // the first Invoke after a resume carries the answer
	if v, ok := t.ResumeValue(); ok {
		var err error
		if first, err = resumeContext(ctx, t, id, v); err != nil {
			return nil, err
		}
	}
	for i := range maxSavePoints + 1 {
		c := ctx
		if i == 0 {
			c = first
		}
		out, err := k.graph.Invoke(c, &Essay{Topic: in.Topic}, compose.WithCheckPointID(id))
		if info, interrupted := compose.ExtractInterruptInfo(err); interrupted {
			if forPerson(info) {
				return nil, park(ctx, t, id, info)
			}
			continue // saved at a step boundary: resume from it
		}
		if err != nil && ctx.Err() != nil {
			// ErrShutdown, ErrLeaseLost or ErrRunCancelled: the runtime
			// records the outcome the cause calls for.
			return nil, fmt.Errorf("essay %s: %w", id, context.Cause(ctx))
		}
		if err != nil {
			return nil, fmt.Errorf("essay %s: %w", id, err) // a refused Set matches fence.IsFenced
		}
		return json.Marshal(out)
	}
	return nil, fmt.Errorf("essay %s: still interrupted after more than %d save points", id, maxSavePoints)
}
