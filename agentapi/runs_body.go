package agentapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// runStreamModes are the stream modes a run may ask for (the reference's
// RunCreate schema).
var runStreamModes = []string{"values", "messages", "messages-tuple", "updates", "events", "tasks", "checkpoints", "debug", "custom"}

// runBody is a run's create body (RunCreate), as the SDKs send it. Every
// field is checked for its type; unknown fields are ignored, as the
// reference does.
type runBody struct {
	AssistantID       string
	Input             json.RawMessage
	Command           json.RawMessage
	Config            map[string]json.RawMessage
	Context           json.RawMessage
	Metadata          map[string]json.RawMessage
	StreamMode        []string
	StreamSubgraphs   bool
	StreamResumable   bool
	InterruptBefore   json.RawMessage
	InterruptAfter    json.RawMessage
	CheckpointID      string
	Checkpoint        map[string]json.RawMessage
	MultitaskStrategy string
	IfNotExists       string
	OnDisconnect      string
	OnCompletion      string
	AfterSeconds      float64
	Webhook           string
	Durability        string
}

// badInput is a body the reference refuses with 422; its message names the
// field.
type badInput struct{ msg string }

func (e *badInput) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badInput{fmt.Sprintf(format, args...)} }

// present says whether a field was sent with a value (null is absent, as
// the reference's optional fields take it).
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// parseRunBody reads one run's body; a body that is not a JSON object or a
// field of the wrong type or value is a *badInput.
func parseRunBody(data []byte) (*runBody, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil || f == nil {
		return nil, badf("body: want a JSON object (RunCreate)")
	}
	return parseRunFields(f)
}

func parseRunFields(f map[string]json.RawMessage) (*runBody, error) {
	b := &runBody{}
	str := func(name string, dst *string, allowed ...string) error {
		raw := f[name]
		if !present(raw) {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return badf("%s: want a string", name)
		}
		if len(allowed) > 0 && !slices.Contains(allowed, *dst) {
			return badf("%s: %q is not one of %s", name, *dst, strings.Join(allowed, ", "))
		}
		return nil
	}
	obj := func(name string, dst *map[string]json.RawMessage) error {
		raw := f[name]
		if !present(raw) {
			return nil
		}
		if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, dst) != nil {
			return badf("%s: want an object", name)
		}
		return nil
	}
	boolean := func(name string, dst *bool) error {
		if raw := f[name]; present(raw) && json.Unmarshal(raw, dst) != nil {
			return badf("%s: want a boolean", name)
		}
		return nil
	}
	nodes := func(name string, dst *json.RawMessage) error {
		raw := f[name]
		if !present(raw) {
			return nil
		}
		var star string
		var list []string
		if (json.Unmarshal(raw, &star) != nil || star != "*") && json.Unmarshal(raw, &list) != nil {
			return badf(`%s: want "*" or a list of node names`, name)
		}
		*dst = raw
		return nil
	}
	if !present(f["assistant_id"]) {
		return nil, badf("assistant_id: required")
	}
	errs := []error{
		str("assistant_id", &b.AssistantID),
		obj("config", &b.Config),
		obj("metadata", &b.Metadata),
		obj("checkpoint", &b.Checkpoint),
		boolean("stream_subgraphs", &b.StreamSubgraphs),
		boolean("stream_resumable", &b.StreamResumable),
		nodes("interrupt_before", &b.InterruptBefore),
		nodes("interrupt_after", &b.InterruptAfter),
		str("checkpoint_id", &b.CheckpointID),
		str("multitask_strategy", &b.MultitaskStrategy, "reject", "rollback", "interrupt", "enqueue"),
		str("if_not_exists", &b.IfNotExists, "reject", "create"),
		str("on_disconnect", &b.OnDisconnect, "cancel", "continue"),
		str("on_completion", &b.OnCompletion, "delete", "keep"),
		str("webhook", &b.Webhook),
		str("durability", &b.Durability, "sync", "async", "exit"),
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if raw := f["command"]; present(raw) {
		var cmd map[string]json.RawMessage
		if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &cmd) != nil {
			return nil, badf("command: want an object with resume, update or goto")
		}
		b.Command = raw
	}
	if raw := f["input"]; present(raw) {
		b.Input = raw
	}
	if raw := f["context"]; present(raw) {
		b.Context = raw
	}
	if raw := f["after_seconds"]; present(raw) {
		if json.Unmarshal(raw, &b.AfterSeconds) != nil || b.AfterSeconds < 0 {
			return nil, badf("after_seconds: want a number of seconds, 0 or more")
		}
	}
	if raw := f["stream_mode"]; present(raw) {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			b.StreamMode = []string{one}
		} else if json.Unmarshal(raw, &b.StreamMode) != nil {
			return nil, badf("stream_mode: want a stream mode or a list of them")
		}
		for _, m := range b.StreamMode {
			if !slices.Contains(runStreamModes, m) {
				return nil, badf("stream_mode: %q is not one of %s", m, strings.Join(runStreamModes, ", "))
			}
		}
	}
	if len(b.StreamMode) == 0 {
		b.StreamMode = []string{"values"}
	}
	if id := b.Checkpoint["checkpoint_id"]; present(id) && b.CheckpointID == "" {
		if json.Unmarshal(id, &b.CheckpointID) != nil {
			return nil, badf("checkpoint.checkpoint_id: want a string")
		}
	}
	return b, nil
}
