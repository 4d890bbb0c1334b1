package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/batonrun/baton/fence"
)

// RunSpec is a run as submitted: a DAG of nodes.
//
//	{"id": "deploy-42", "nodes": [
//	  {"id": "build", "kind": "exec", "input": {"command": ["make"]}},
//	  {"id": "ship", "kind": "http", "deps": ["build"], "max_attempts": 5}]}
type RunSpec struct {
	// ID names the run; empty: a random one. Submitting the same id with
	// the same spec again is a no-op; with another spec, a conflict.
	ID string `json:"id,omitempty" yaml:"id,omitempty"`
	// Thread groups runs of one conversation; empty: the run is its own.
	Thread string `json:"thread,omitempty" yaml:"thread,omitempty"`
	// Multitask says what to do when the thread is busy (its active run
	// has not finished, or runs wait): "reject" (the default with a
	// thread) refuses the new run with fence.ErrThreadBusy; "enqueue"
	// queues it (FIFO) to start when the runs before it end, whatever
	// their outcome; "interrupt" cancels the active run, keeping its
	// checkpoints, and starts next; "rollback" cancels it and deletes the
	// checkpoints it wrote, then starts next. LangGraph's names and
	// meanings.
	Multitask string     `json:"multitask,omitempty" yaml:"multitask,omitempty"`
	Nodes     []NodeSpec `json:"nodes" yaml:"nodes"`
}

// NodeSpec is one node of a RunSpec.
type NodeSpec struct {
	ID   string   `json:"id" yaml:"id"`
	Kind string   `json:"kind" yaml:"kind"`
	Deps []string `json:"deps,omitempty" yaml:"deps,omitempty"`
	// Input is the kind's input, any JSON value.
	Input json.RawMessage `json:"input,omitempty" yaml:"-"`
	// MaxAttempts bounds the attempts (failures and lost leases); zero:
	// the client's default (3).
	MaxAttempts int `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`
	// Timeout bounds one attempt: "90s", "5m" or a number of seconds.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Queue is the Asynq queue; empty: "default".
	Queue string `json:"queue,omitempty" yaml:"queue,omitempty"`
}

// Duration is a time.Duration that reads "90s" or 90 (seconds).
type Duration time.Duration

// UnmarshalJSON reads a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want e.g. \"90s\" or \"5m\"", s)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string like \"90s\" or a number of seconds", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ErrInvalidSpec is wrapped by every error about a malformed run spec.
var ErrInvalidSpec = errors.New("baton: invalid run spec")

// SpecError names the field of a run spec that is wrong.
type SpecError struct {
	Field string // e.g. "nodes[2].deps[0]"
	Msg   string
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Msg }
func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

// ParseSpec reads a run spec in JSON or YAML. Unknown fields are errors: a
// typo in "max_attempts" must not silently mean the default.
func ParseSpec(data []byte) (*RunSpec, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, &SpecError{Field: "spec", Msg: "empty"}
	}
	if data[0] != '{' || !json.Valid(data) { // YAML, including flow style
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, &SpecError{Field: "spec", Msg: "neither JSON nor YAML: " + err.Error()}
		}
		j, err := json.Marshal(normalizeYAML(v))
		if err != nil {
			return nil, &SpecError{Field: "spec", Msg: "YAML has no JSON form: " + err.Error()}
		}
		data = j
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s RunSpec
	if err := dec.Decode(&s); err != nil {
		return nil, &SpecError{Field: "spec", Msg: err.Error()}
	}
	return &s, nil
}

// normalizeYAML turns YAML maps into JSON-encodable ones.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeYAML(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalizeYAML(e)
		}
		return x
	}
	return v
}

// Limits bound what a run spec may hold.
type Limits struct {
	// MaxInputBytes caps each node's input. Zero value: 1 MiB.
	MaxInputBytes int
	// MaxNodes caps the nodes of one run. Zero value: 1000.
	MaxNodes int
	// DefaultMaxAttempts applies where a node sets none. Zero value: 3.
	DefaultMaxAttempts int
}

func (l Limits) withDefaults() Limits {
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = 1 << 20
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = 1000
	}
	if l.DefaultMaxAttempts <= 0 {
		l.DefaultMaxAttempts = 3
	}
	return l
}

// Validate checks the spec and returns every problem at once, each a
// *SpecError naming its field, joined with errors.Join.
func (s *RunSpec) Validate(lim Limits) error {
	lim = lim.withDefaults()
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &SpecError{Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	badID := func(field, id string) {
		if err := fence.ValidateID(field, id); err != nil {
			bad(field, "%s", strings.TrimPrefix(err.Error(), field+": "))
		}
	}
	if s.ID != "" {
		badID("id", s.ID)
	}
	if s.Thread != "" {
		badID("thread", s.Thread)
	}
	switch s.Multitask {
	case "":
	case "reject", "enqueue", "interrupt", "rollback":
		if s.Thread == "" {
			bad("multitask", "needs a thread")
		}
	default:
		bad("multitask", "%q is not a strategy (reject, enqueue, interrupt or rollback)", s.Multitask)
	}
	if len(s.Nodes) == 0 {
		bad("nodes", "a run needs at least one node")
	}
	if len(s.Nodes) > lim.MaxNodes {
		bad("nodes", "%d nodes, at most %d", len(s.Nodes), lim.MaxNodes)
	}
	index := make(map[string]int, len(s.Nodes))
	for i, n := range s.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		badID(f+".id", n.ID)
		if j, dup := index[n.ID]; dup && n.ID != "" {
			bad(f+".id", "duplicate node id %q (also nodes[%d])", n.ID, j)
		}
		index[n.ID] = i
		if n.Kind == "" {
			bad(f+".kind", "missing")
		} else {
			badID(f+".kind", n.Kind)
		}
		if n.Queue != "" {
			badID(f+".queue", n.Queue)
		}
		if len(n.Input) > lim.MaxInputBytes {
			bad(f+".input", "%d bytes, at most %d", len(n.Input), lim.MaxInputBytes)
		}
		if n.MaxAttempts < 0 || n.MaxAttempts > 1000 {
			bad(f+".max_attempts", "%d, want 1 to 1000 (0: default)", n.MaxAttempts)
		}
		if n.Timeout < 0 {
			bad(f+".timeout", "negative")
		}
	}
	for i, n := range s.Nodes {
		seen := map[string]bool{}
		for j, d := range n.Deps {
			f := fmt.Sprintf("nodes[%d].deps[%d]", i, j)
			switch _, ok := index[d]; {
			case !ok:
				bad(f, "unknown node %q", d)
			case d == n.ID:
				bad(f, "node %q depends on itself", d)
			case seen[d]:
				bad(f, "duplicate dependency %q", d)
			}
			seen[d] = true
		}
	}
	if len(errs) == 0 {
		if cycle := findCycle(s.Nodes, index); cycle != nil {
			bad("nodes", "dependency cycle: %s", strings.Join(cycle, " -> "))
		}
	}
	return errors.Join(errs...)
}

// findCycle returns one cycle as a path of node ids, or nil.
func findCycle(nodes []NodeSpec, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(nodes))
	var stack []string
	var visit func(i int) []string
	visit = func(i int) []string {
		color[i] = grey
		stack = append(stack, nodes[i].ID)
		for _, d := range nodes[i].Deps {
			j := index[d]
			switch color[j] {
			case grey:
				for k, id := range stack {
					if id == d {
						return append(append([]string{}, stack[k:]...), d)
					}
				}
			case white:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		return nil
	}
	for i := range nodes {
		if color[i] == white {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// compile turns a validated spec into what fence stores: dependents,
// transitive descendants, defaults, and a digest for idempotent resubmits.
func (s *RunSpec) compile(lim Limits) ([]fence.NodeSpec, string, error) {
	lim = lim.withDefaults()
	index := make(map[string]int, len(s.Nodes))
	for i, n := range s.Nodes {
		index[n.ID] = i
	}
	dependents := make([][]string, len(s.Nodes))
	for _, n := range s.Nodes {
		for _, d := range n.Deps {
			dependents[index[d]] = append(dependents[index[d]], n.ID)
		}
	}
	out := make([]fence.NodeSpec, len(s.Nodes))
	for i, n := range s.Nodes {
		input := "null"
		if len(n.Input) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, n.Input); err != nil {
				return nil, "", &SpecError{Field: fmt.Sprintf("nodes[%d].input", i), Msg: err.Error()}
			}
			input = buf.String()
		}
		attempts := n.MaxAttempts
		if attempts == 0 {
			attempts = lim.DefaultMaxAttempts
		}
		queue := n.Queue
		if queue == "" {
			queue = DefaultQueue
		}
		out[i] = fence.NodeSpec{ID: n.ID, Kind: n.Kind, Queue: queue, Input: input,
			Deps: nonNil(n.Deps), Dependents: nonNil(dependents[i]),
			Descendants: descendants(i, s.Nodes, index, dependents),
			MaxAttempts: attempts, TimeoutMS: time.Duration(n.Timeout).Milliseconds()}
	}
	canon, err := json.Marshal(struct {
		Thread string           `json:"thread"`
		Nodes  []fence.NodeSpec `json:"nodes"`
	}{s.Thread, out})
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(canon)
	return out, hex.EncodeToString(sum[:]), nil
}

func descendants(i int, nodes []NodeSpec, index map[string]int, dependents [][]string) []string {
	seen := map[string]bool{}
	out := []string{}
	queue := append([]string{}, dependents[i]...)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
		queue = append(queue, dependents[index[id]]...)
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
