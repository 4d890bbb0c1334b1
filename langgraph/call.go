package langgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
)

// Sentinels of a call's failure, matched with errors.Is on a *CallError.
var (
	// ErrNotFound: what the call names (a checkpoint, a subgraph
	// namespace) does not exist.
	ErrNotFound = errors.New("langgraph: not found")
	// ErrInvalid: the call's arguments are wrong (an unknown graph, a
	// malformed argument).
	ErrInvalid = errors.New("langgraph: invalid call")
)

// CallError is a call the worker answered with an error. Code is the
// worker's word for it: "not_found", "invalid" or "internal".
type CallError struct {
	Op, Code, Message string
}

func (e *CallError) Error() string { return fmt.Sprintf("langgraph: %s: %s", e.Op, e.Message) }

// Is matches ErrNotFound and ErrInvalid by Code.
func (e *CallError) Is(target error) bool {
	return target == ErrNotFound && e.Code == "not_found" || target == ErrInvalid && e.Code == "invalid"
}

// StatusCode is the HTTP status an API answers the call's failure with,
// so a handler needs no import of this package to map it.
func (e *CallError) StatusCode() int {
	switch e.Code {
	case "not_found":
		return http.StatusNotFound
	case "invalid":
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// callMsg asks the worker for something only the graph knows.
type callMsg struct {
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// callOps are the calls the workers answer (docs/graph-workers.md, "Calls").
var callOps = []string{"get_state", "history", "schemas", "graph", "subgraphs"}

var callSeq atomic.Int64

// IDs lists the graph ids of the project's langgraph.json, sorted.
func (k *Kind) IDs() []string { return slices.Sorted(maps.Keys(k.project.Graphs)) }

// Call asks the worker of args' graph for op's answer (get_state,
// history, schemas, graph, subgraphs), read with a read-only saver: it
// takes no attempt slot and waits for no attempt. args is marshalled to
// JSON and must name a "graph" of the project. A failure the worker
// reports is a *CallError (errors.Is ErrNotFound, ErrInvalid).
func (k *Kind) Call(ctx context.Context, op string, args any) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("langgraph: %s: args: %w", op, err)
	}
	if !slices.Contains(callOps, op) {
		return nil, &CallError{Op: op, Code: "invalid", Message: fmt.Sprintf("unknown op %q (want one of %v)", op, callOps)}
	}
	var head struct {
		Graph string `json:"graph"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, &CallError{Op: op, Code: "invalid", Message: "args: want an object with a graph"}
	}
	g, ok := k.project.Graphs[head.Graph]
	if !ok {
		return nil, &CallError{Op: op, Code: "not_found", Message: fmt.Sprintf("unknown graph %q (the project has %v)", head.Graph, k.IDs())}
	}
	pr, err := k.process(g.Lang)
	if err != nil {
		return nil, err
	}
	id := "call-" + strconv.FormatInt(callSeq.Add(1), 10)
	ch := pr.register(id)
	defer pr.unregister(id)
	if err := pr.send(callMsg{Type: "call", ID: id, Op: op, Args: raw}); err != nil {
		return nil, fmt.Errorf("langgraph: %s: send to the graph worker: %w", op, err)
	}
	for {
		select {
		case m := <-ch:
			if m.Type != "reply" {
				continue
			}
			if m.Error != "" {
				return nil, &CallError{Op: op, Code: m.Code, Message: m.Error}
			}
			return m.Result, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-pr.exited:
			return nil, fmt.Errorf("langgraph: %s: the graph worker process (pid %d) ended (%v): %s", op, pr.pid, pr.err, pr.stderrTail())
		}
	}
}
