package langgraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// input is a graph node's input (docs/graph-workers.md, "The node kind
// graph").
type input struct {
	Graph      string          `json:"graph"`
	Input      json.RawMessage `json:"input,omitempty"`
	Command    json.RawMessage `json:"command,omitempty"`
	Config     json.RawMessage `json:"config,omitempty"`
	StreamMode json.RawMessage `json:"stream_mode,omitempty"`
	runFields
}

// runFields are the input fields the Agent Server API's runs carry, handed
// to the worker as they are once checked: everything the API shows later
// about a run lives in its node's input, so creating a run is one submit.
type runFields struct {
	// Context is the graph's runtime context (LangGraph's context=).
	Context json.RawMessage `json:"context,omitempty"`
	// InterruptBefore and InterruptAfter are "*" or a list of node names.
	InterruptBefore json.RawMessage `json:"interrupt_before,omitempty"`
	InterruptAfter  json.RawMessage `json:"interrupt_after,omitempty"`
	// CheckpointID runs from that past checkpoint of the thread.
	CheckpointID string `json:"checkpoint_id,omitempty"`
	// Subgraphs streams the subgraphs' chunks too, as "mode|ns" events.
	Subgraphs bool `json:"subgraphs,omitempty"`
	// AssistantID is kept for the API; Metadata also goes to the graph's
	// config.metadata.
	AssistantID string          `json:"assistant_id,omitempty"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
	// Interrupts "end": an interrupt ends the attempt SUCCEEDED with
	// {"values", "interrupts", "next"} instead of parking the node.
	Interrupts string `json:"interrupts,omitempty"`
	// Resumes are the interrupt ids a command.resume answers: the attempt
	// fails permanently unless one is pending at the thread's head.
	Resumes []string `json:"resumes,omitempty"`
	// UpdateState, {"values", "as_node", "checkpoint_id"}, updates the
	// thread's state instead of running the graph.
	UpdateState json.RawMessage `json:"update_state,omitempty"`
}

var streamModes = []string{"values", "updates", "messages", "messages-tuple", "custom", "tasks", "checkpoints",
	"debug", "events"}

var inputFields = "graph, input, command, config, stream_mode, context, interrupt_before, interrupt_after, " +
	"checkpoint_id, subgraphs, assistant_id, metadata, interrupts, resumes, update_state"

func (k *Kind) parse(raw json.RawMessage) (input, []string, error) {
	var in input
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return in, nil, fmt.Errorf("graph node input: want a JSON object with %s", inputFields)
	}
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(strings.Split(inputFields, ", "), f) {
			return in, nil, fmt.Errorf("graph node input: unknown field %q (want %s)", f, inputFields)
		}
		// null is "not given" (an API body's unset field), but for input,
		// where null means "go on from the thread's state".
		if f != "input" && f != "graph" && string(bytes.TrimSpace(fields[f])) == "null" {
			delete(fields, f)
			continue
		}
		if err := checkField(f, fields[f]); err != nil {
			return in, nil, fmt.Errorf("graph node input: %s: %w", f, err)
		}
	}
	clean, err := json.Marshal(fields)
	if err != nil {
		return in, nil, fmt.Errorf("graph node input: %w", err)
	}
	if err := json.Unmarshal(clean, &in); err != nil {
		return in, nil, fmt.Errorf("graph node input: %w", err)
	}
	if _, ok := k.project.Graphs[in.Graph]; !ok {
		return in, nil, fmt.Errorf("unknown graph %q: %s has %s", in.Graph, k.project.Path,
			strings.Join(k.IDs(), ", "))
	}
	var modes []string
	if len(in.StreamMode) > 0 && string(in.StreamMode) != "null" {
		var one string
		if json.Unmarshal(in.StreamMode, &one) == nil {
			modes = []string{one}
		} else if err := json.Unmarshal(in.StreamMode, &modes); err != nil {
			return in, nil, fmt.Errorf("graph node input: stream_mode: want a mode or a list of modes")
		}
	}
	for _, m := range modes {
		if !slices.Contains(streamModes, m) {
			return in, nil, fmt.Errorf("graph node input: stream_mode %q: want one of %s", m, strings.Join(streamModes, ", "))
		}
	}
	if err := checkRelations(in, fields); err != nil {
		return in, nil, fmt.Errorf("graph node input: %w", err)
	}
	return in, modes, nil
}

// checkField checks one field's JSON type, so a bad input fails the node
// before anything is written, with a message naming the field.
func checkField(name string, v json.RawMessage) error {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return err
	}
	switch name {
	case "graph", "assistant_id", "checkpoint_id":
		if s, ok := x.(string); !ok || (s == "" && name != "assistant_id") {
			return fmt.Errorf("want a non-empty string, got %s", v)
		}
	case "config", "metadata":
		if _, ok := x.(map[string]any); !ok && x != nil {
			return fmt.Errorf("want an object, got %s", v)
		}
	case "context":
		if _, ok := x.(map[string]any); !ok && x != nil {
			return fmt.Errorf("want an object or null, got %s", v)
		}
	case "command":
		c, ok := x.(map[string]any)
		if !ok && x != nil {
			return fmt.Errorf("want an object {\"resume\", \"update\", \"goto\"}, got %s", v)
		}
		for key := range c {
			if key != "resume" && key != "update" && key != "goto" {
				return fmt.Errorf("unknown key %q (want resume, update, goto)", key)
			}
		}
	case "interrupt_before", "interrupt_after":
		if s, ok := x.(string); ok && s == "*" || x == nil {
			return nil
		}
		l, ok := x.([]any)
		for _, e := range l {
			if s, isStr := e.(string); !isStr || s == "" {
				ok = false
			}
		}
		if !ok {
			return fmt.Errorf("want \"*\" or a list of node names, got %s", v)
		}
	case "subgraphs":
		if _, ok := x.(bool); !ok {
			return fmt.Errorf("want true or false, got %s", v)
		}
	case "interrupts":
		if s, ok := x.(string); !ok || (s != "end" && s != "park") {
			return fmt.Errorf("want \"end\" (an interrupt ends the attempt) or \"park\" (the default), got %s", v)
		}
	case "resumes":
		l, ok := x.([]any)
		for _, e := range l {
			if s, isStr := e.(string); !isStr || s == "" {
				ok = false
			}
		}
		if !ok || len(l) == 0 {
			return fmt.Errorf("want a non-empty list of interrupt ids, got %s", v)
		}
	case "update_state":
		u, ok := x.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object {\"values\", \"as_node\", \"checkpoint_id\"}, got %s", v)
		}
		for key, e := range u {
			switch key {
			case "values":
			case "as_node", "checkpoint_id":
				if s, isStr := e.(string); e != nil && (!isStr || s == "") {
					return fmt.Errorf("%s: want a non-empty string, got %v", key, e)
				}
			default:
				return fmt.Errorf("unknown key %q (want values, as_node, checkpoint_id)", key)
			}
		}
	}
	return nil
}

// checkRelations checks what fields say together.
func checkRelations(in input, fields map[string]json.RawMessage) error {
	_, hasInput := fields["input"]
	_, hasCommand := fields["command"]
	if len(in.UpdateState) > 0 && (hasInput || hasCommand || len(in.CheckpointID) > 0) {
		return fmt.Errorf("update_state: it runs nothing, so input, command and checkpoint_id have no place beside it " +
			"(update_state has its own checkpoint_id)")
	}
	if len(in.Resumes) > 0 {
		var c map[string]json.RawMessage
		_ = json.Unmarshal(in.Command, &c)
		if _, ok := c["resume"]; !ok {
			return fmt.Errorf("resumes: it names the interrupts a command.resume answers, and command has no resume")
		}
	}
	return nil
}
