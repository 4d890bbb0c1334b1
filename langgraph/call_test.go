package langgraph

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// realKind starts the real worker of a project (Python from the
// repository's virtualenv, or node with js/src/worker.js) on a real
// redis-server; skipped when the interpreter is missing.
type realBundle struct {
	kind   *Kind
	client *runner.Client
	store  *fence.Store
	mu     sync.Mutex
	chunks []Chunk
}

func realKind(t *testing.T, project string) *realBundle {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, "python", ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Skip("no python/.venv: the real worker tests need LangGraph installed there")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node")
	}
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	prefix := "lgcall"
	p, err := Load(filepath.Join(root, project))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", filepath.Join(root, "python"))
	b := &realBundle{}
	k, err := New(p, Options{Python: python, JSWorker: filepath.Join(root, "js", "src", "worker.js"),
		RedisURL: "redis://" + srv.Addr(), Prefix: prefix, Env: []string{"PYTHONPATH"},
		Streamer: StreamFunc(func(_ context.Context, _ *runner.Task, cs []Chunk) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.chunks = append(b.chunks, cs...)
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.kind = k
	b.client, err = runner.NewClient(runner.ClientConfig{Redis: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.client.Close() })
	b.store = fence.New(rdb, &fence.Options{Keys: fence.Keys{Prefix: prefix}})
	return b
}

// run submits a one-node run on thread, claims it and runs input through
// the kind, then commits it: the thread is idle again.
func (b *realBundle) run(t *testing.T, thread, input string) (json.RawMessage, error) {
	t.Helper()
	ctx := context.Background()
	sub, err := b.client.Submit(ctx, &runner.RunSpec{Thread: thread, Multitask: "enqueue",
		Nodes: []runner.NodeSpec{{ID: "graph", Kind: "noop"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.store.Claim(ctx, fence.NodeRef{Thread: thread, Run: sub.RunID, Node: "graph"}, "w", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, runErr := b.kind.Run(ctx, runner.NewTask(c.Lease, KindName, json.RawMessage(input), 0))
	if _, err := b.store.Commit(ctx, c.Lease, []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	return res, runErr
}

func call(t *testing.T, k *Kind, op string, args any, into any) {
	t.Helper()
	raw, err := k.Call(context.Background(), op, args)
	if err != nil {
		t.Fatalf("Call(%s) = %v", op, err)
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("Call(%s) = %s: %v", op, raw, err)
	}
}

type threadState struct {
	Values     map[string]any   `json:"values"`
	Next       []string         `json:"next"`
	Tasks      []map[string]any `json:"tasks"`
	Metadata   map[string]any   `json:"metadata"`
	CreatedAt  *string          `json:"created_at"`
	Checkpoint *struct {
		ThreadID     string `json:"thread_id"`
		CheckpointNS string `json:"checkpoint_ns"`
		CheckpointID string `json:"checkpoint_id"`
	} `json:"checkpoint"`
	ParentCheckpoint map[string]any   `json:"parent_checkpoint"`
	Interrupts       []map[string]any `json:"interrupts"`
}

// Each call reaches the worker of the graph's language and answers in the
// API's shapes, from the state the graph's runs wrote; a failure is a
// *CallError with the HTTP status the API answers.
func TestCallsAnswerFromAPythonAndAJSGraph(t *testing.T) {
	for _, tc := range []struct{ lang, project, review string }{
		{"python", "examples/langgraph/langgraph.json", "review"},
		{"js", "js/test/fixtures/project/langgraph.json", "review"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			b := realKind(t, tc.project)
			k := b.kind
			if ids := k.IDs(); !strings.Contains(strings.Join(ids, ","), "agent") || !strings.Contains(strings.Join(ids, ","), "review") {
				t.Fatalf("IDs = %v", ids)
			}
			res, err := b.run(t, "t1", `{"graph": "review", "input": {"change": "v1"}, "interrupts": "end"}`)
			if err != nil {
				t.Fatal(err)
			}
			var ended struct {
				Values     map[string]any   `json:"values"`
				Interrupts []map[string]any `json:"interrupts"`
				Next       []string         `json:"next"`
			}
			if err := json.Unmarshal(res, &ended); err != nil || len(ended.Interrupts) != 1 || ended.Next[0] != "ask" {
				t.Fatalf("result %s", res)
			}

			var st threadState
			call(t, k, "get_state", map[string]any{"graph": "review", "thread": "t1"}, &st)
			if st.Checkpoint == nil || st.Checkpoint.ThreadID != "t1" || len(st.Next) != 1 || st.Next[0] != "ask" ||
				len(st.Interrupts) != 1 || st.Interrupts[0]["id"] != ended.Interrupts[0]["id"] || len(st.Tasks) != 1 {
				t.Fatalf("get_state = %+v", st)
			}
			var hist []threadState
			call(t, k, "history", map[string]any{"graph": "review", "thread": "t1", "limit": 2}, &hist)
			if len(hist) != 2 || hist[0].Checkpoint.CheckpointID != st.Checkpoint.CheckpointID {
				t.Fatalf("history = %+v", hist)
			}
			var sch map[string]any
			call(t, k, "schemas", map[string]any{"graph": "review"}, &sch)
			if sch["graph_id"] != "review" {
				t.Fatalf("schemas = %v", sch)
			}
			var drawn struct {
				Nodes []struct {
					ID string `json:"id"`
				} `json:"nodes"`
				Edges []any `json:"edges"`
			}
			call(t, k, "graph", map[string]any{"graph": "agent"}, &drawn)
			if len(drawn.Nodes) != 4 || len(drawn.Edges) != 3 {
				t.Fatalf("graph = %+v", drawn)
			}
			var subs map[string]any
			call(t, k, "subgraphs", map[string]any{"graph": "agent"}, &subs)
			if len(subs) != 0 {
				t.Fatalf("subgraphs = %v", subs)
			}

			_, err = k.Call(context.Background(), "get_state", map[string]any{"graph": "review", "thread": "t1", "checkpoint_id": "nope"})
			var ce *CallError
			if !errors.As(err, &ce) || !errors.Is(err, ErrNotFound) || ce.StatusCode() != 404 || !strings.Contains(err.Error(), "nope") {
				t.Fatalf("a checkpoint the thread has not: %v", err)
			}
			_, err = k.Call(context.Background(), "history", map[string]any{"graph": "review", "thread": "t1", "limit": -1})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit") {
				t.Fatalf("a bad limit: %v", err)
			}
			_, err = k.Call(context.Background(), "get_state", map[string]any{"graph": "nope", "thread": "t1"})
			if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `unknown graph "nope"`) {
				t.Fatalf("an unknown graph: %v", err)
			}
			_, err = k.Call(context.Background(), "drop", map[string]any{"graph": "review"})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `unknown op "drop"`) {
				t.Fatalf("an unknown op: %v", err)
			}
		})
	}
}

// A call is answered while every attempt slot is taken by a graph that
// runs on: calls take no slot and wait for no attempt.
func TestACallIsAnsweredWhileAttemptsRun(t *testing.T) {
	b := realKind(t, "python/tests/fixtures/project/langgraph.json")
	b.kind.opts.MaxAttempts = 1
	b.kind.slots = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub, err := b.client.Submit(ctx, &runner.RunSpec{Thread: "busy", Nodes: []runner.NodeSpec{{ID: "graph", Kind: "noop"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.store.Claim(ctx, fence.NodeRef{Thread: "busy", Run: sub.RunID, Node: "graph"}, "w", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	in, _ := json.Marshal(map[string]any{"graph": "slow", "input": map[string]any{"log": filepath.Join(t.TempDir(), "log"), "seconds": 60}})
	go func() {
		_, err := b.kind.Run(ctx, runner.NewTask(c.Lease, KindName, in, 0))
		done <- err
	}()
	for len(b.kind.slots) == 0 {
		time.Sleep(time.Millisecond) // until the attempt holds the only slot
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	var st threadState
	raw, err := b.kind.Call(cctx, "get_state", map[string]any{"graph": "slow", "thread": "busy"})
	if err != nil || json.Unmarshal(raw, &st) != nil {
		t.Fatalf("Call while the slot is taken = %s, %v", raw, err)
	}
	select {
	case err := <-done:
		t.Fatalf("the attempt ended before the call was answered: %v", err)
	default:
	}
	cancel()
	<-done
}
