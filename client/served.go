package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// ErrUnserved is wrapped by SubmitServed's refusal of a run with a node no
// live runner would claim.
var ErrUnserved = errors.New("baton: no live runner serves the node")

// UnservedError is SubmitServed's refusal: one problem per node whose kind
// and queue no live runner serves, each naming the node's field
// ("nodes[1].kind"). It unwraps to those problems, so a caller that lists
// a spec's problems lists these the same way.
type UnservedError struct {
	Problems []*spec.Error
}

func (e *UnservedError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems; each unwraps to spec.ErrInvalid.
func (e *UnservedError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// Is reports ErrUnserved.
func (e *UnservedError) Is(target error) bool { return target == ErrUnserved }

// checkServed refuses nodes no live runner serves, reading the fleet now
// (not the cache Submit's warnings use: a strict submit is about this
// moment).
func (c *Client) checkServed(ctx context.Context, nodes []spec.CompiledNode) error {
	live, err := c.store.Workers(ctx)
	if err != nil {
		return fmt.Errorf("reading the live runners to check the kinds are served: %w", err)
	}
	var problems []*spec.Error
	for i, n := range nodes {
		if why := fence.Unserved(live, n.Kind, n.Queue); why != "" {
			problems = append(problems, &spec.Error{Field: fmt.Sprintf("nodes[%d].kind", i),
				Msg: why + "; nothing stored"})
		}
	}
	if problems != nil {
		return &UnservedError{Problems: problems}
	}
	return nil
}
