package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cloudwego/eino/compose"
)

// Decision is a person's answer to the approval graph's question: the
// value a resume of its node carries.
type Decision struct {
	Approved bool   `json:"approved"`
	Note     string `json:"note"`
}

// Ask is what the approval graph's approve node asks, as the interrupt's
// info: it becomes the wait's request (Request.Interrupts[].Info).
type Ask struct {
	Question string   `json:"question"`
	Trail    []string `json:"trail"`
	// Error says why the previous answer was not taken.
	Error string `json:"error,omitempty"`
}

// newApprovalGraph compiles a graph that asks a person before it
// publishes: draft → approve → publish. approve interrupts the graph with
// compose.StatefulInterrupt until it is resumed with a Decision, which it
// reads with compose.GetResumeContext, as any Eino human-in-the-loop node
// does.
// The interrupt before publish is a save point, like the essay graph's.
func newApprovalGraph(ctx context.Context, store compose.CheckPointStore, hook stepHook) (compose.Runnable[*Essay, *Essay], error) {
	g := compose.NewGraph[*Essay, *Essay]()
	for _, n := range []struct {
		name string
		fn   func(context.Context, *Essay) (*Essay, error)
	}{
		{"draft", stepFunc("draft", hook)},
		{"approve", approveStep(hook)},
		{"publish", publishStep(hook)},
	} {
		if err := g.AddLambdaNode(n.name, compose.InvokableLambda(n.fn)); err != nil {
			return nil, err
		}
	}
	for _, e := range [][2]string{{compose.START, "draft"}, {"draft", "approve"}, {"approve", "publish"}, {"publish", compose.END}} {
		if err := g.AddEdge(e[0], e[1]); err != nil {
			return nil, err
		}
	}
	return g.Compile(ctx, compose.WithGraphName("approval"), compose.WithCheckPointStore(store),
		compose.WithInterruptBeforeNodes([]string{"publish"}))
}

// approveStep asks a person whether to publish, and records the answer.
// A resume value that is not a Decision is asked again, saying why.
func approveStep(hook stepHook) func(context.Context, *Essay) (*Essay, error) {
	return func(ctx context.Context, in *Essay) (*Essay, error) {
		if hook != nil {
			hook(ctx, "approve")
		}
		// Eino does not keep an interrupted node's input: the node keeps
		// it as its interrupt state, and reads it back when run again.
		if _, ok, saved := compose.GetInterruptState[*Essay](ctx); ok {
			in = saved
		}
		ask := Ask{Question: "publish the essay on " + in.Topic + "?", Trail: in.Trail}
		resumed, hasData, raw := compose.GetResumeContext[json.RawMessage](ctx)
		if !resumed {
			// The first run, or a resume meant for another interrupt.
			return nil, compose.StatefulInterrupt(ctx, ask, in)
		}
		var d Decision
		if !hasData || json.Unmarshal(raw, &d) != nil {
			ask.Error = fmt.Sprintf(`want {"approved": true|false, "note": "..."}, got %s`, raw)
			return nil, compose.StatefulInterrupt(ctx, ask, in)
		}
		trail := append(append([]string{}, in.Trail...), fmt.Sprintf("%s: approved=%v %q", ranBy(ctx, "approve"), d.Approved, d.Note))
		return &Essay{Topic: in.Topic, Trail: trail, Decision: &d}, nil
	}
}

// publishStep publishes an approved essay; a rejected one is shelved.
func publishStep(hook stepHook) func(context.Context, *Essay) (*Essay, error) {
	return func(ctx context.Context, in *Essay) (*Essay, error) {
		if hook != nil {
			hook(ctx, "publish")
		}
		step := "publish"
		if in.Decision == nil || !in.Decision.Approved {
			step = "shelve"
		}
		trail := append(append([]string{}, in.Trail...), ranBy(ctx, step))
		return &Essay{Topic: in.Topic, Trail: trail, Decision: in.Decision}, nil
	}
}
