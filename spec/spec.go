package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
	"time"
)

// Run is a run as submitted: a DAG of nodes.
//
//	{"id": "deploy-42", "nodes": [
//	  {"id": "build", "kind": "exec", "input": {"command": ["make"]}},
//	  {"id": "ship", "kind": "http", "deps": ["build"], "max_attempts": 5}]}
type Run struct {
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
	Multitask string `json:"multitask,omitempty" yaml:"multitask,omitempty"`
	Nodes     []Node `json:"nodes" yaml:"nodes"`
	// StartAt (RFC 3339) or StartIn (a duration, from the submit on
	// Redis's clock) delays the run: its root nodes become due then. At
	// most one of the two; neither: at once.
	StartAt *time.Time `json:"start_at,omitempty" yaml:"start_at,omitempty"`
	StartIn Duration   `json:"start_in,omitempty" yaml:"start_in,omitempty"`
	// Timeout bounds the whole run: once it has passed since the run's
	// start (start_at or start_in when set, else the submit), what is left
	// of the run is cancelled, with the reason "timeout 10m passed". Zero:
	// none. A node's own timeout bounds one attempt.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Notify, when set, is a webhook POSTed once the run has ended
	// (runner.Notifier). Nil: none.
	Notify *Notify `json:"notify,omitempty" yaml:"notify,omitempty"`

	// textBytes is the length of the text Parse read this run from; zero
	// for a Run built in Go, whose size is that of its JSON encoding.
	textBytes int
}

// size is the spec's size as Limits.MaxSpecBytes counts it; for a Run
// built in Go, an upper bound when that is under limit (no encoding on
// the submit path of small runs), else its JSON encoding's length.
func (s *Run) size(limit int) int64 {
	if s.textBytes > 0 {
		return int64(s.textBytes)
	}
	// JSON writes a string's byte as at most 6 ("\u0001") and an input
	// as at most its length (compacted); every other field fits in the
	// 512 bytes each node and the run are allowed.
	bound := 512 + 6*(len(s.ID)+len(s.Thread)+len(s.Multitask)+len(s.Notify.url()))
	for _, n := range s.Nodes {
		bound += 512 + len(n.Input) + 6*(len(n.ID)+len(n.Kind)+len(n.Queue))
		if r := n.Retry; r != nil {
			bound += 6 * len(r.Backoff)
		}
		for _, d := range n.Deps {
			bound += 3 + 6*len(d)
		}
		if bound > limit {
			break
		}
	}
	if bound <= limit {
		return int64(bound)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil { // an input that is not JSON: Validate names it
		return 0
	}
	return int64(buf.Len() - 1) // Encode's newline
}

// Node is one node of a Run.
type Node struct {
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
	// Retry is the backoff between failed attempts; nil: the worker's
	// default (exponential with jitter).
	Retry *RetryPolicy `json:"retry,omitempty" yaml:"retry,omitempty"`
	// Limits are the fleet-wide limits the node takes part in (see
	// LimitUse): a slot of each concurrency limit and the node's cost of
	// each rate, taken by its claim. Nil: none.
	Limits []LimitUse `json:"limits,omitempty" yaml:"limits,omitempty"`
}

// Duration is a time.Duration that reads "90s" or 90 (seconds).
type Duration time.Duration

// UnmarshalJSON reads a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var (
		v   Duration
		msg string
	)
	if string(b) == "null" { // as absent, the convention of encoding/json
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, msg = durationOf(s)
	} else {
		v, msg = secondsOf(string(b), string(b))
	}
	if msg != "" {
		return errors.New("timeout " + msg)
	}
	*d = v
	return nil
}

// String is the Go duration without zero units at its end: "10m", not
// "10m0s".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes the Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ErrInvalid is wrapped by every error about a malformed run spec.
var ErrInvalid = errors.New("baton: invalid run spec")

// Error names the field of a run spec that is wrong.
type Error struct {
	Field string // e.g. "nodes[2].deps[0]"
	Msg   string
}

func (e *Error) Error() string { return e.Field + ": " + e.Msg }
func (e *Error) Unwrap() error { return ErrInvalid }

// Format is the syntax a run spec is written in.
type Format int

const (
	// Auto: JSON when the first character that is not white space is
	// "{" or "[", YAML otherwise. Invalid JSON is an error, never read
	// again as YAML: a typo must not turn into another meaning.
	Auto Format = iota
	JSON
	YAML
)

// FormatOf names the format of a spec from a file name (.json, .yaml,
// .yml) or a media type (a Content-Type such as application/json or
// application/yaml); Auto when it says neither.
func FormatOf(nameOrType string) Format {
	s := strings.ToLower(strings.TrimSpace(nameOrType))
	if mt, _, err := mime.ParseMediaType(s); err == nil {
		switch {
		case mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json"):
			return JSON
		case mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" ||
			mt == "text/x-yaml" || strings.HasSuffix(mt, "+yaml"):
			return YAML
		}
	}
	switch path.Ext(s) {
	case ".json":
		return JSON
	case ".yaml", ".yml":
		return YAML
	}
	return Auto
}

// Parse reads a run spec in JSON or YAML, telling them apart as
// Auto does. See ParseAs.
func Parse(data []byte) (*Run, error) { return ParseAs(data, Auto) }

// ParseAs reads a run spec in the given format. It is strict: unknown
// keys (a typo in "max_attempts" must not silently mean the default),
// duplicate keys and keys that differ from a field only in case are
// errors, and so is a value of the wrong type or one too large for its
// field. Every problem is reported, up to 20 of them, each a *Error
// naming the field path and the line and column; they are joined with
// errors.Join. Problems with the text itself (syntax, keys) are filed
// under the field "spec".
func ParseAs(data []byte, format Format) (*Run, error) {
	text := bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	i := bytes.IndexFunc(text, func(r rune) bool { return r != ' ' && r != '\t' && r != '\r' && r != '\n' })
	if i < 0 {
		return nil, &Error{Field: "spec", Msg: "empty"}
	}
	var (
		root *value
		err  error
	)
	switch {
	case format == JSON:
		root, err = parseJSON(text, "")
	case format == Auto && (text[i] == '{' || text[i] == '['):
		root, err = parseJSON(text, fmt.Sprintf("; read as JSON because it starts with %q (YAML in flow style: start it with ---)", text[i]))
	default:
		root, err = parseYAML(data)
	}
	if err != nil {
		return nil, err
	}
	d := specDecoder{limit: expansionLimit(len(data))}
	s := d.run(root)
	if s == nil {
		return nil, d.p.err()
	}
	s.textBytes = len(data)
	return s, nil
}

// Limits bound what a run spec may hold.
type Limits struct {
	// MaxInputBytes caps each node's input. Zero value: 1 MiB.
	MaxInputBytes int
	// MaxNodes caps the nodes of one run. Zero value: 1000.
	MaxNodes int
	// DefaultMaxAttempts applies where a node sets none. Zero value: 3.
	DefaultMaxAttempts int
	// MaxSpecBytes caps a whole spec: its text as written, or, for a Run
	// built in Go, its JSON encoding. The CLI, the HTTP API and the Go
	// client apply the same cap (MAX_SPEC_BYTES). Zero value:
	// DefaultMaxSpecBytes.
	MaxSpecBytes int
	// Policy, when set, refuses what the runners would refuse a job: an
	// http URL or a webhook into a private range, an $env or $file the
	// operator does not allow (see Policy). Nil: not checked at submit;
	// the runner still refuses it when the node runs.
	Policy Policy
}

// DefaultMaxSpecBytes is the cap on a whole spec when Limits.MaxSpecBytes
// is zero: 8 MiB, room for several inputs at the default 1 MiB cap.
const DefaultMaxSpecBytes = 8 << 20

// CheckSize refuses a spec of size bytes over l's MaxSpecBytes, with a
// *Error naming both. A negative size means "larger than the cap, by how
// much unknown" (a stream cut off at the cap).
func (l Limits) CheckSize(size int64) error {
	limit := int64(l.WithDefaults().MaxSpecBytes)
	switch {
	case size < 0:
		return &Error{Field: "spec", Msg: fmt.Sprintf("more than %d bytes, at most %d (MAX_SPEC_BYTES)", limit, limit)}
	case size > limit:
		return &Error{Field: "spec", Msg: fmt.Sprintf("%d bytes, at most %d (MAX_SPEC_BYTES)", size, limit)}
	}
	return nil
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = 1 << 20
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = 1000
	}
	if l.DefaultMaxAttempts <= 0 {
		l.DefaultMaxAttempts = 3
	}
	if l.MaxSpecBytes <= 0 {
		l.MaxSpecBytes = DefaultMaxSpecBytes
	}
	return l
}

// Validate checks the spec and returns every problem at once (up to 20,
// then how many more), each a *Error naming its field, joined with
// errors.Join.
func (s *Run) Validate(lim Limits) error {
	lim = lim.WithDefaults()
	if err := lim.CheckSize(s.size(lim.MaxSpecBytes)); err != nil {
		return err // nothing else is worth reading in a spec that large
	}
	var p problems
	s.check(lim, &p)
	return p.err()
}

// check files the spec's problems in p.
func (s *Run) check(lim Limits, p *problems) {
	bad := p.addf
	badID := func(field, id string) {
		if msg := idProblem(id); msg != "" {
			bad(field, "%s", msg)
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
			bad("thread", "multitask needs a thread")
		}
	default:
		bad("multitask", "%s: not a strategy: want reject, enqueue, interrupt or rollback", quote(s.Multitask))
	}
	if s.StartAt != nil && s.StartIn != 0 {
		bad("start_in", "set start_at or start_in, not both")
	}
	if s.StartIn < 0 {
		bad("start_in", "negative")
	}
	if s.Timeout < 0 {
		bad("timeout", "negative")
	}
	s.Notify.check(bad) // notify.go
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
			bad(f+".id", "duplicate node id %s (also nodes[%d])", quote(n.ID), j)
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
		} else {
			checkStockInput(f, n, bad) // input.go
		}
		if n.MaxAttempts < 0 || n.MaxAttempts > 1000 {
			bad(f+".max_attempts", "%d: want 1 to 1000 (0: default)", n.MaxAttempts)
		}
		if n.Timeout < 0 {
			bad(f+".timeout", "negative")
		}
		checkLimits(f, n, bad) // limits.go
		if r := n.Retry; r != nil {
			switch r.Backoff {
			case "", "exponential", "fixed":
			default:
				bad(f+".retry.backoff", "%s: want exponential or fixed", quote(r.Backoff))
			}
			if r.Base < 0 {
				bad(f+".retry.base", "negative")
			}
			if r.Max < 0 {
				bad(f+".retry.max", "negative")
			}
			if r.Base > 0 && r.Max > 0 && r.Max < r.Base {
				bad(f+".retry.max", "%s is below base %s", time.Duration(r.Max), time.Duration(r.Base))
			}
		}
	}
	for i, n := range s.Nodes {
		seen := map[string]bool{}
		for j, d := range n.Deps {
			f := fmt.Sprintf("nodes[%d].deps[%d]", i, j)
			switch _, ok := index[d]; {
			case !ok:
				bad(f, "unknown node %s", quote(d))
			case d == n.ID:
				bad(f, "node %s depends on itself", quote(d))
			case seen[d]:
				bad(f, "duplicate dependency %s", quote(d))
			}
			seen[d] = true
		}
		// An input reference to a node that is not a direct dependency
		// could never resolve: refuse it now rather than fail the node.
		for _, ref := range depRefs(n.Input) {
			if !seen[ref] {
				bad(fmt.Sprintf("nodes[%d].input", i), "refers to %s ({\"$dep\": ...}), which is not in its deps", quote(ref))
			}
		}
	}
	s.checkPolicy(lim.Policy, bad) // policy.go
	if p.empty() {
		if cycle := findCycle(s.Nodes, index); cycle != nil {
			bad("nodes", "dependency cycle: %s", cyclePath(cycle))
		}
	}
}

// cyclePath writes a cycle of node ids, eliding the middle of a long one.
func cyclePath(cycle []string) string {
	const show = 8
	if len(cycle) <= show+1 {
		return strings.Join(cycle, " -> ")
	}
	return strings.Join(cycle[:show/2], " -> ") + " -> ... -> " + strings.Join(cycle[len(cycle)-show/2:], " -> ") +
		fmt.Sprintf(" (%d nodes)", len(cycle)-1)
}

// findCycle returns one cycle as a path of node ids, or nil.
func findCycle(nodes []Node, index map[string]int) []string {
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

// DefaultQueue is the Asynq queue of nodes that name none.
const DefaultQueue = "default"

// Compiled is a run as the submit script stores it: every node with its
// dependents, transitive descendants and defaults filled in, and a digest
// that makes a resubmit of the same spec a no-op.
type Compiled struct {
	Nodes  []CompiledNode
	Digest string
}

// CompiledNode is one node as fence stores it. It has fence.NodeSpec's
// fields, in the same order and with the same JSON names, so package client
// converts one to the other with fence.NodeSpec(n): a conversion the
// compiler refuses the day the two differ. spec itself links no Redis.
type CompiledNode struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Queue       string   `json:"queue"`
	Input       string   `json:"input"` // JSON text, compacted
	Deps        []string `json:"deps"`
	Dependents  []string `json:"dependents"`
	Descendants []string `json:"descendants"`
	MaxAttempts int      `json:"max_attempts"`
	TimeoutMS   int64    `json:"timeout_ms"`
	Retry       string   `json:"retry,omitempty"` // the RetryPolicy as JSON; "": the worker's default
	// Limits are the node's limit keys with their costs, templates
	// filled in: "openai=1,tenant:acme=1"; "": none.
	Limits string `json:"limits,omitempty"`
}

// Compile validates the spec (every problem at once, as Validate) and
// turns it into what fence stores. It is the one call between a parsed
// spec and a submit, so no caller can store a spec it forgot to validate.
func (s *Run) Compile(lim Limits) (*Compiled, error) {
	if s == nil {
		return nil, &Error{Field: "spec", Msg: "missing"}
	}
	if err := s.Validate(lim); err != nil {
		return nil, err
	}
	nodes, digest, err := s.compile(lim)
	if err != nil {
		return nil, err
	}
	return &Compiled{Nodes: nodes, Digest: digest}, nil
}

// compile turns a validated spec into what fence stores: dependents,
// transitive descendants, defaults, and a digest for idempotent resubmits.
func (s *Run) compile(lim Limits) ([]CompiledNode, string, error) {
	lim = lim.WithDefaults()
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
	out := make([]CompiledNode, len(s.Nodes))
	for i, n := range s.Nodes {
		input := "null"
		if len(n.Input) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, n.Input); err != nil {
				return nil, "", &Error{Field: fmt.Sprintf("nodes[%d].input", i), Msg: err.Error()}
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
		limits, err := compileLimits(fmt.Sprintf("nodes[%d]", i), n, s.ID, cmpOr(s.Thread, s.ID))
		if err != nil {
			return nil, "", err
		}
		out[i] = CompiledNode{ID: n.ID, Kind: n.Kind, Queue: queue, Input: input,
			Deps: nonNil(n.Deps), Dependents: nonNil(dependents[i]),
			Descendants: descendants(i, s.Nodes, index, dependents),
			MaxAttempts: attempts, TimeoutMS: time.Duration(n.Timeout).Milliseconds(), Retry: n.Retry.encode(),
			Limits: limits}
	}
	// A start is part of the run's identity: resubmitting the same spec
	// is a no-op, a spec with another start a conflict. Unset, it leaves
	// the digest as it was before starts existed.
	var startAt int64
	if s.StartAt != nil {
		startAt = s.StartAt.UnixMilli()
	}
	canon, err := json.Marshal(struct {
		Thread  string         `json:"thread"`
		Nodes   []CompiledNode `json:"nodes"`
		StartAt int64          `json:"start_at,omitempty"`
		StartIn int64          `json:"start_in,omitempty"`
		Notify  string         `json:"notify,omitempty"`
		Timeout int64          `json:"timeout,omitempty"`
	}{s.Thread, out, startAt, time.Duration(s.StartIn).Milliseconds(), s.Notify.url(), time.Duration(s.Timeout).Milliseconds()})
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(canon)
	return out, hex.EncodeToString(sum[:]), nil
}

func descendants(i int, nodes []Node, index map[string]int, dependents [][]string) []string {
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
