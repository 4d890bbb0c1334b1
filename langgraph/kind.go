package langgraph

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// KindName is the node kind that runs a graph of the project:
// {"kind": "graph", "input": {"graph": "agent", "input": {...}}}.
const KindName = "graph"

// Chunk is one item of a graph's stream: its mode ("values", "updates",
// "messages", "custom", "tasks", "checkpoints", "debug") and its data.
type Chunk = fence.StreamChunk

// Streamer writes an attempt's chunks, in order, to its run's stream. An
// error that fence.IsFenced matches means the attempt lost its claim: the
// graph is cancelled. Any other error is logged and the chunks dropped.
type Streamer interface {
	Stream(ctx context.Context, t *runner.Task, chunks []Chunk) error
}

// StreamFunc adapts a function to Streamer.
type StreamFunc func(ctx context.Context, t *runner.Task, chunks []Chunk) error

// Stream calls f.
func (f StreamFunc) Stream(ctx context.Context, t *runner.Task, chunks []Chunk) error {
	return f(ctx, t, chunks)
}

// TaskStreamer writes chunks with the attempt's Task.Stream: to the run's
// stream (GET /v1/runs/{id}/stream), refused once the claim is gone.
var TaskStreamer Streamer = StreamFunc(func(ctx context.Context, t *runner.Task, chunks []Chunk) error {
	return t.Stream(ctx, chunks...)
})

// Options configure the graph workers of a project.
type Options struct {
	// Python is the interpreter of the Python graphs, the project's own
	// virtualenv's (LANGGRAPH_PYTHON), with baton-langgraph installed.
	// Default: "python3".
	Python string
	// RedisURL and Prefix are the store the worker's savers write to: the
	// runner's.
	RedisURL, Prefix string
	// Node is the node binary of the JS graphs (LANGGRAPH_NODE). Default:
	// "node".
	Node string
	// JSWorker is the JS worker's script. Default: the project's
	// node_modules/@baton/langgraph-saver/src/worker.js, looked for from
	// the project's folder up, as node resolves a package.
	JSWorker string
	// Env names the runner's variables the workers get besides PATH,
	// HOME, LANG and TZ (NAME or PREFIX_*; the runner's EXEC_ENV, as for
	// exec commands). The project's langgraph.json env is always passed.
	// Default: none.
	Env []string
	// MaxAttempts is how many attempts one worker process runs at once.
	// Default: 10.
	MaxAttempts int
	// StartTimeout bounds loading the graphs. Default: 2m.
	StartTimeout time.Duration
	// CancelWait is how long a cancelled attempt waits for the worker to
	// say its graph's task ended. Default: 5s.
	CancelWait time.Duration
	// StopGrace is how long Close gives the worker to exit. Default: 5s.
	StopGrace time.Duration
	// Streamer receives the chunks of the stream modes a node asks for.
	// Default (nil): the attempt's Task.Stream, the run's stream in the
	// store, fenced by the attempt's claim.
	Streamer Streamer
	Logger   *slog.Logger
}

// Kind runs the project's graphs in a warm worker process, started by
// Start, restarted when it dies. It is a runner.Kind: the runner claims
// the node, renews its lease, commits or parks it; Kind hands the attempt
// to the worker and waits for its outcome.
type Kind struct {
	project *Project
	opts    Options
	log     *slog.Logger
	slots   chan struct{}

	// workers are the worker processes by language ("python", "js").
	workers map[string]*slot
}

// slot holds a language's live worker process, started on demand.
type slot struct {
	lang string
	mu   sync.Mutex
	cur  *process
}

// New returns the kind of a project's graphs: one worker process for its
// Python graphs, one for its JS ones (docs/graph-workers.md).
func New(p *Project, o Options) (*Kind, error) {
	o.Python = cmp.Or(o.Python, "python3")
	o.Node = cmp.Or(o.Node, "node")
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	o.StartTimeout = cmp.Or(o.StartTimeout, 2*time.Minute)
	o.CancelWait = cmp.Or(o.CancelWait, 5*time.Second)
	o.StopGrace = cmp.Or(o.StopGrace, 5*time.Second)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Streamer == nil {
		o.Streamer = TaskStreamer
	}
	if o.RedisURL == "" {
		return nil, fmt.Errorf("%w: the graph worker needs the runner's REDIS_URL (cluster and sentinel modes are not supported yet)", ErrConfig)
	}
	k := &Kind{project: p, opts: o, log: o.Logger, slots: make(chan struct{}, o.MaxAttempts), workers: map[string]*slot{}}
	for _, id := range slices.Sorted(maps.Keys(p.Graphs)) {
		g := p.Graphs[id]
		if g.Lang == "js" && k.opts.JSWorker == "" {
			w, ok := findJSWorker(p.Dir)
			if !ok {
				return nil, fmt.Errorf("%w: %s: graph %q is JavaScript, and no node_modules/%s above %s: "+
					"install it in the project (npm install), or set LANGGRAPH_JS_WORKER", ErrConfig, p.Path, id, jsWorkerPath, p.Dir)
			}
			k.opts.JSWorker = w
		}
		if k.workers[g.Lang] == nil {
			k.workers[g.Lang] = &slot{lang: g.Lang}
		}
	}
	return k, nil
}

// jsWorkerPath is the JS worker's script inside node_modules.
const jsWorkerPath = "@baton/langgraph-saver/src/worker.js"

// findJSWorker looks for node_modules/<jsWorkerPath> in dir and its parents.
func findJSWorker(dir string) (string, bool) {
	for {
		p := filepath.Join(dir, "node_modules", filepath.FromSlash(jsWorkerPath))
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, true
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", false
		}
		dir = up
	}
}

// Start starts the workers and returns once they have imported every
// graph, or with an import error and its traceback.
func (k *Kind) Start(ctx context.Context) error {
	for _, lang := range slices.Sorted(maps.Keys(k.workers)) {
		if _, err := k.process(lang); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the workers: each cancels what it still runs and exits; it
// is killed after StopGrace.
func (k *Kind) Close() {
	var wg sync.WaitGroup
	for _, s := range k.workers {
		s.mu.Lock()
		pr := s.cur
		s.cur = nil
		s.mu.Unlock()
		if pr != nil {
			wg.Go(func() { pr.stop(k.opts.StopGrace) })
		}
	}
	wg.Wait()
}

// PID is the id of a language's worker process, 0 when none runs (tests
// kill it).
func (k *Kind) PID(lang string) int {
	s := k.workers[lang]
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.dead() {
		return 0
	}
	return s.cur.pid
}

// process returns a language's live worker, starting one if none is.
func (k *Kind) process(lang string) (*process, error) {
	s := k.workers[lang]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && !s.cur.dead() {
		return s.cur, nil
	}
	restart := s.cur != nil
	pr, err := startProcess(k.project, k.opts, lang, k.log)
	if err != nil {
		return nil, err
	}
	if restart {
		k.log.Warn("graph_worker_restarted", "pid", pr.pid, "lang", lang)
	}
	s.cur = pr
	return pr, nil
}

// runMsg hands one attempt to the worker.
type runMsg struct {
	Type        string          `json:"type"`
	ID          string          `json:"id"`
	Graph       string          `json:"graph"`
	Run         string          `json:"run"`
	Node        string          `json:"node"`
	Thread      string          `json:"thread"`
	Attempt     int64           `json:"attempt"`
	Epoch       int64           `json:"epoch"`
	Claim       string          `json:"claim"`
	Worker      string          `json:"worker"`
	Incarnation string          `json:"incarnation,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Command     json.RawMessage `json:"command,omitempty"`
	Config      json.RawMessage `json:"config,omitempty"`
	StreamMode  []string        `json:"stream_mode"`
	Resume      *resumeMsg      `json:"resume,omitempty"`
	runFields
}

type resumeMsg struct {
	Wait  string          `json:"wait"`
	Value json.RawMessage `json:"value"`
}

// Run runs one attempt of a graph node in the worker.
func (k *Kind) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	in, modes, err := k.parse(t.Input)
	if err != nil {
		return nil, runner.Permanent(err)
	}
	select {
	case k.slots <- struct{}{}:
		defer func() { <-k.slots }()
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	pr, err := k.process(k.project.Graphs[in.Graph].Lang)
	if err != nil {
		return nil, err // retried: the graph worker could not start again
	}
	l := t.Lease
	msg := runMsg{Type: "run", ID: l.ClaimID, Graph: in.Graph, Run: l.Run, Node: l.Node, Thread: l.Thread,
		Attempt: l.Attempt, Epoch: l.Epoch, Claim: l.ClaimID, Worker: l.Owner, Incarnation: l.Incarnation,
		Input: in.Input, Command: in.Command, Config: in.Config, StreamMode: modes, runFields: in.runFields}
	if v, ok := t.ResumeValue(); ok {
		msg.Resume = &resumeMsg{Wait: t.ResumedWait(), Value: v}
	}
	ch := pr.register(msg.ID)
	defer pr.unregister(msg.ID)
	if err := pr.send(msg); err != nil {
		return nil, fmt.Errorf("graph %s: hand the attempt to the graph worker: %w", in.Graph, err)
	}
	return k.wait(ctx, t, pr, ch, in.Graph)
}
