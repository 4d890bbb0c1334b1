package langgraph

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// The test binary stands in for the Python worker when started as
// "<binary> -m baton_langgraph.worker": it speaks the protocol with canned
// answers, so these tests need no Python. FAKE_WORKER picks its behaviour.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "-m" && os.Args[2] == "baton_langgraph.worker" {
		fakeWorker()
		return
	}
	os.Exit(m.Run())
}

func fakeWorker() {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	in.Scan() // init
	if os.Getenv("FAKE_WORKER") == "fatal" {
		_ = out.Encode(message{Type: "fatal", Error: "ImportError: no module named x", Traceback: "Traceback (most recent call last):\n  File \"g.py\""})
		os.Exit(3)
	}
	_ = out.Encode(message{Type: "ready", Graphs: []string{"g"}})
	for in.Scan() {
		var m struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		}
		_ = json.Unmarshal(in.Bytes(), &m)
		switch {
		case m.Type == "run" && string(m.Input) == `"die"`:
			fmt.Fprintln(os.Stderr, "the worker dies")
			os.Exit(9)
		case m.Type == "run" && string(m.Input) == `"env"`:
			_ = out.Encode(message{Type: "done", ID: m.ID, Result: must(json.Marshal(os.Environ()))})
		case m.Type == "run" && string(m.Input) == `"hang"`:
			// waits for a cancel
		case m.Type == "run" && string(m.Input) == `"chunk-then-hang"`:
			_ = out.Encode(message{Type: "chunk", ID: m.ID, Event: "updates", Data: json.RawMessage(`{}`)})
		case m.Type == "run":
			for i := range 300 {
				_ = out.Encode(message{Type: "chunk", ID: m.ID, Event: "messages", Data: json.RawMessage(fmt.Sprint(i))})
			}
			_ = out.Encode(message{Type: "done", ID: m.ID, Result: json.RawMessage(`{"ok":true}`)})
		case m.Type == "cancel":
			_ = out.Encode(message{Type: "cancelled", ID: m.ID})
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func fakeKind(t *testing.T, streamer Streamer, env ...string) *Kind {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "g.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &Project{Path: filepath.Join(dir, "langgraph.json"), Dir: dir,
		Graphs: map[string]Graph{"g": {ID: "g", File: filepath.Join(dir, "g.py"), Attr: "graph", Lang: "python"}}}
	k, err := New(p, Options{Python: self, RedisURL: "redis://unused", Streamer: streamer, CancelWait: 2 * time.Second,
		Env: []string{"FAKE_*"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func task(input string) *runner.Task {
	l := fence.Lease{Thread: "t", Run: "r", Node: "n", Attempt: 1, Epoch: 1, ClaimID: fmt.Sprintf("c%d", time.Now().UnixNano()),
		Owner: "w", Until: time.Now().Add(time.Minute)}
	return runner.NewTask(l, KindName, json.RawMessage(input), 0)
}

// Every chunk reaches the Streamer, in the order the worker wrote them,
// before the attempt's result.
func TestChunksReachTheStreamerInOrderBeforeTheResult(t *testing.T) {
	var mu sync.Mutex
	var got []string
	k := fakeKind(t, StreamFunc(func(_ context.Context, _ *runner.Task, cs []Chunk) error {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cs {
			got = append(got, c.Event+":"+string(c.Data))
		}
		return nil
	}))
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), task(`{"graph": "g", "input": "x", "stream_mode": "messages-tuple"}`))
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("Run = %s, %v", res, err)
	}
	if len(got) != 300 {
		t.Fatalf("%d chunks, want 300", len(got))
	}
	for i, c := range got {
		if c != fmt.Sprintf("messages:%d", i) {
			t.Fatalf("chunk %d is %s", i, c)
		}
	}
}

// A chunk the store refuses (the claim is gone) cancels the graph, and
// the attempt ends as lost, with the refusal.
func TestARefusedChunkCancelsTheAttempt(t *testing.T) {
	k := fakeKind(t, StreamFunc(func(context.Context, *runner.Task, []Chunk) error {
		return fmt.Errorf("stream: %w", fence.ErrStaleEpoch)
	}))
	tk := task(`{"graph": "g", "input": "chunk-then-hang"}`)
	tk.Lease.Until = time.Now() // the runner would cancel it at once; here lostWait's floor, 1s
	_, err := k.Run(context.Background(), tk)
	if err == nil || !strings.Contains(err.Error(), "stale epoch") {
		t.Fatalf("Run = %v, want the refusal", err)
	}
}

// A chunk the store cannot take fails the node, naming why, and the graph
// is cancelled.
func TestAChunkOverTheCapFailsTheNode(t *testing.T) {
	k := fakeKind(t, StreamFunc(func(context.Context, *runner.Task, []Chunk) error {
		return fmt.Errorf("stream: chunk 0: %w", fence.ErrTooLarge)
	}))
	_, err := k.Run(context.Background(), task(`{"graph": "g", "input": "chunk-then-hang"}`))
	if !runner.IsPermanent(err) || !errors.Is(err, fence.ErrTooLarge) || !strings.Contains(err.Error(), "a stream chunk was refused") {
		t.Fatalf("Run = %v", err)
	}
}

// A graph worker that dies fails only its attempts, retryably, with its
// stderr; the next attempt starts a new worker.
func TestAWorkerThatDiesFailsItsAttemptAndIsRestarted(t *testing.T) {
	k := fakeKind(t, nil)
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := k.PID("python")
	_, err := k.Run(context.Background(), task(`{"graph": "g", "input": "die"}`))
	if err == nil || runner.IsPermanent(err) || !strings.Contains(err.Error(), "the worker dies") {
		t.Fatalf("Run = %v, want a retryable error quoting stderr", err)
	}
	res, err := k.Run(context.Background(), task(`{"graph": "g", "input": "x"}`))
	if err != nil || string(res) != `{"ok":true}` {
		t.Fatalf("the next Run = %s, %v", res, err)
	}
	if pid := k.PID("python"); pid == first || pid == 0 {
		t.Errorf("pid %d after %d: not a new worker", pid, first)
	}
}

// A cancelled attempt is cancelled in the worker and ends with the cause.
func TestACancelReachesTheWorker(t *testing.T) {
	k := fakeKind(t, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := k.Run(ctx, task(`{"graph": "g", "input": "hang"}`))
		done <- err
	}()
	cancel(runner.ErrRunCancelled)
	select {
	case err := <-done:
		if !errors.Is(err, runner.ErrRunCancelled) || !strings.Contains(err.Error(), "cancelled") {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the cancelled attempt did not end")
	}
}

// Bad input fails the node at once, naming what is wrong.
func TestBadInputIsPermanent(t *testing.T) {
	k := fakeKind(t, nil)
	for in, want := range map[string]string{
		`{"graph": "nope"}`:                       `unknown graph "nope"`,
		`{"graph": "g", "stream_mode": "evnets"}`: `stream_mode "evnets"`,
		`{"graph": "g", "inptu": {}}`:             `unknown field "inptu"`,
		`{"graph": "g", "stream_mode": {"a": 1}}`: `want a mode or a list`,
		`[1]`:                          `want a JSON object`,
		`{"graph": "g", "context": 3}`: `context: want an object or null`,
		`{"graph": "g", "interrupt_before": "a"}`:                     `interrupt_before: want "*" or a list of node names`,
		`{"graph": "g", "interrupt_after": [1]}`:                      `interrupt_after: want "*" or a list of node names`,
		`{"graph": "g", "checkpoint_id": ""}`:                         `checkpoint_id: want a non-empty string`,
		`{"graph": "g", "subgraphs": "yes"}`:                          `subgraphs: want true or false`,
		`{"graph": "g", "assistant_id": 7}`:                           `assistant_id: want a non-empty string`,
		`{"graph": "g", "metadata": [1]}`:                             `metadata: want an object`,
		`{"graph": "g", "config": "x"}`:                               `config: want an object`,
		`{"graph": "g", "interrupts": "stop"}`:                        `interrupts: want "end"`,
		`{"graph": "g", "resumes": []}`:                               `resumes: want a non-empty list of interrupt ids`,
		`{"graph": "g", "resumes": ["i1"]}`:                           `resumes: it names the interrupts a command.resume answers`,
		`{"graph": "g", "command": {"rsume": 1}}`:                     `command: unknown key "rsume"`,
		`{"graph": "g", "update_state": 1}`:                           `update_state: want an object`,
		`{"graph": "g", "update_state": {"as_node": 1}}`:              `update_state: as_node: want a non-empty string`,
		`{"graph": "g", "update_state": {"vals": 1}}`:                 `update_state: unknown key "vals"`,
		`{"graph": "g", "update_state": {"values": {}}, "input": {}}`: `update_state: it runs nothing`,
	} {
		_, err := k.Run(context.Background(), task(in))
		if !runner.IsPermanent(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want permanent with %q", in, err, want)
		}
	}
}

// A field given as null is a field not given (an API body's unset
// fields), but input, where null means "go on from the thread's state".
func TestNullFieldsAreNotGiven(t *testing.T) {
	k := fakeKind(t, nil)
	in, _, err := k.parse(json.RawMessage(`{"graph": "g", "input": null, "command": null, "context": null,
		"interrupt_before": null, "checkpoint_id": null, "subgraphs": null, "metadata": null, "interrupts": null,
		"resumes": null, "update_state": null, "stream_mode": null, "assistant_id": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(in.Input) != "null" || in.Command != nil || in.UpdateState != nil || in.Context != nil || in.Resumes != nil {
		t.Fatalf("parsed %+v", in)
	}
	b, _ := json.Marshal(runMsg{Type: "run", runFields: in.runFields})
	if strings.Contains(string(b), "update_state") || strings.Contains(string(b), "context") {
		t.Fatalf("the run line carries unset fields: %s", b)
	}
}

// A graph that fails to import stops Start with the worker's traceback.
func TestStartReportsTheImportErrorAndTraceback(t *testing.T) {
	k := fakeKind(t, nil, "FAKE_WORKER=fatal")
	err := k.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "ImportError: no module named x") ||
		!strings.Contains(err.Error(), "Traceback (most recent call last)") {
		t.Fatalf("Start = %v", err)
	}
}

// The worker runs the project's code with what an exec command gets
// (PATH, HOME, LANG, TZ, the names EXEC_ENV allows) and the project's own
// env: the runner's token, webhook secret and Redis credentials stay with
// the runner, whose store reaches the worker on stdin instead.
func TestTheWorkerGetsNoneOfTheRunnersSecrets(t *testing.T) {
	k := fakeKind(t, nil, "API_TOKEN=s3cret-token", "REDIS_URL=redis://:pw@h:6379/0", "WEBHOOK_SECRET=whs",
		"FAKE_ALLOWED=yes")
	k.project.Env = map[string]string{"FROM_PROJECT": "1"}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(context.Background(), task(`{"graph": "g", "input": "env"}`))
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	if err := json.Unmarshal(res, &env); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	for _, secret := range []string{"API_TOKEN", "REDIS_URL", "WEBHOOK_SECRET"} {
		if names[secret] {
			t.Errorf("the worker got %s", secret)
		}
	}
	for _, want := range []string{"PATH", "FAKE_ALLOWED", "FROM_PROJECT"} {
		if !names[want] {
			t.Errorf("the worker lacks %s: %v", want, env)
		}
	}
}
