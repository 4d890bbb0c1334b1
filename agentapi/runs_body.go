package agentapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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
	StrictResume      bool
	// Headers are the request's headers the reference hands the graph in
	// config.configurable: x-* (but credentials) and user-agent.
	Headers map[string]string
}

// headerConfigurable picks the headers the reference puts in a run's
// config.configurable: every X-* header but the ones that carry
// credentials, and User-Agent, by their lower-case names.
func headerConfigurable(h http.Header) map[string]string {
	out := map[string]string{}
	for name, vs := range h {
		k := strings.ToLower(name)
		switch {
		case k == "x-api-key" || k == "x-tenant-id" || k == "x-service-key" || len(vs) == 0:
		case strings.HasPrefix(k, "x-") || k == "user-agent":
			out[k] = vs[0]
		}
	}
	return out
}

// runsBadInput is a body the reference refuses with 422; its message names the
// field.
type runsBadInput struct{ msg string }

func (e *runsBadInput) Error() string { return e.msg }

func runsBadf(format string, args ...any) error { return &runsBadInput{fmt.Sprintf(format, args...)} }

// runsPresent says whether a field was sent with a value (null is absent, as
// the reference's optional fields take it).
func runsPresent(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// parseRunBody reads one run's body; a body that is not a JSON object or a
// field of the wrong type or value is a *runsBadInput.
func parseRunBody(data []byte) (*runBody, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil || f == nil {
		return nil, runsBadf("body: want a JSON object (RunCreate)")
	}
	return parseRunFields(f)
}

func parseRunFields(f map[string]json.RawMessage) (*runBody, error) {
	b := &runBody{}
	str := func(name string, dst *string, allowed ...string) error {
		raw := f[name]
		if !runsPresent(raw) {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return runsBadf("%s: want a string", name)
		}
		if len(allowed) > 0 && !slices.Contains(allowed, *dst) {
			return runsBadf("%s: %q is not one of %s", name, *dst, strings.Join(allowed, ", "))
		}
		return nil
	}
	obj := func(name string, dst *map[string]json.RawMessage) error {
		raw := f[name]
		if !runsPresent(raw) {
			return nil
		}
		if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, dst) != nil {
			return runsBadf("%s: want an object", name)
		}
		return nil
	}
	boolean := func(name string, dst *bool) error {
		if raw := f[name]; runsPresent(raw) && json.Unmarshal(raw, dst) != nil {
			return runsBadf("%s: want a boolean", name)
		}
		return nil
	}
	nodes := func(name string, dst *json.RawMessage) error {
		raw := f[name]
		if !runsPresent(raw) {
			return nil
		}
		var star string
		var list []string
		if (json.Unmarshal(raw, &star) != nil || star != "*") && json.Unmarshal(raw, &list) != nil {
			return runsBadf(`%s: want "*" or a list of node names`, name)
		}
		*dst = raw
		return nil
	}
	if !runsPresent(f["assistant_id"]) {
		return nil, runsBadf("assistant_id: required")
	}
	errs := []error{
		str("assistant_id", &b.AssistantID),
		obj("config", &b.Config),
		obj("metadata", &b.Metadata),
		obj("checkpoint", &b.Checkpoint),
		boolean("stream_subgraphs", &b.StreamSubgraphs),
		boolean("stream_resumable", &b.StreamResumable),
		boolean("strict_resume", &b.StrictResume),
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
	if raw := f["command"]; runsPresent(raw) {
		var cmd map[string]json.RawMessage
		if bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &cmd) != nil {
			return nil, runsBadf("command: want an object with resume, update or goto")
		}
		b.Command = raw
	}
	if raw := f["input"]; runsPresent(raw) {
		b.Input = raw
	}
	if raw := f["context"]; runsPresent(raw) {
		b.Context = raw
	}
	if raw := f["after_seconds"]; runsPresent(raw) {
		if json.Unmarshal(raw, &b.AfterSeconds) != nil || b.AfterSeconds < 0 {
			return nil, runsBadf("after_seconds: want a number of seconds, 0 or more")
		}
	}
	if raw := f["stream_mode"]; runsPresent(raw) {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			b.StreamMode = []string{one}
		} else if json.Unmarshal(raw, &b.StreamMode) != nil {
			return nil, runsBadf("stream_mode: want a stream mode or a list of them")
		}
		for _, m := range b.StreamMode {
			if !slices.Contains(runStreamModes, m) {
				return nil, runsBadf("stream_mode: %q is not one of %s", m, strings.Join(runStreamModes, ", "))
			}
		}
	}
	if len(b.StreamMode) == 0 {
		b.StreamMode = []string{"values"}
	}
	if id := b.Checkpoint["checkpoint_id"]; runsPresent(id) && b.CheckpointID == "" {
		if json.Unmarshal(id, &b.CheckpointID) != nil {
			return nil, runsBadf("checkpoint.checkpoint_id: want a string")
		}
	}
	return b, nil
}
