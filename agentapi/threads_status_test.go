package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/spec"
)

// fakeGraphKind stands in for package langgraph's graph kind: the node's
// input says what the "graph" does. A state update answers a checkpoint,
// or fails for as_node "boom"; input {"do": "interrupt"} ends with an
// interrupt, "fail" fails, "block" runs until release is closed.
func fakeGraphKind(release <-chan struct{}, started chan<- string) runner.KindFunc {
	return func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		var in struct {
			Input struct {
				Do string `json:"do"`
			} `json:"input"`
			UpdateState *stateUpdate `json:"update_state"`
		}
		if err := json.Unmarshal(task.Input, &in); err != nil {
			return nil, runner.Permanent(err)
		}
		if in.UpdateState != nil {
			if in.UpdateState.AsNode == "__boom" {
				return nil, runner.Permanent(errors.New("graph raised"))
			}
			return json.RawMessage(`{"checkpoint":{"thread_id":"` + task.Lease.Thread + `","checkpoint_ns":"","checkpoint_id":"c2"}}`), nil
		}
		switch in.Input.Do {
		case "interrupt":
			return json.RawMessage(`{"values":{"n":1},"interrupts":[{"id":"i1","value":"ok?"}],"next":["step"]}`), nil
		case "plain": // a graph run without the API's fields answers its output
			return json.RawMessage(`{"n":7}`), nil
		case "fail":
			return nil, runner.Permanent(errors.New("graph raised"))
		case "block":
			if started != nil {
				started <- task.Lease.Run
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		return json.RawMessage(`{"values":{"n":2},"interrupts":[]}`), nil
	}
}

// submitGraphRun runs the graph on thread as the runs routes do, and
// waits for it unless wait is false.
func (b *bundle) submitGraphRun(t *testing.T, thread, do string, wait bool) string {
	t.Helper()
	id := newID()
	input, _ := json.Marshal(map[string]any{"graph": "agent", "input": map[string]string{"do": do}})
	submit(t, b, id, thread, input)
	if wait {
		_, err := b.client.Wait(t.Context(), id)
		require.NoError(t, err)
	}
	return id
}

// submit stores a run of one graph node with input on thread.
func submit(t *testing.T, b *bundle, id, thread string, input json.RawMessage) {
	t.Helper()
	_, err := b.client.Submit(t.Context(), &spec.Run{ID: id, Thread: thread, Multitask: "reject",
		Nodes: []spec.Node{{ID: "graph", Kind: "graph", Input: input, MaxAttempts: 1}}})
	require.NoError(t, err)
}

// submitRaw submits a graph run with input and waits for it to end.
func submitRaw(t *testing.T, b *bundle, id, thread string, input json.RawMessage) {
	t.Helper()
	submit(t, b, id, thread, input)
	_, err := b.client.Wait(t.Context(), id)
	require.NoError(t, err)
}

func (b *bundle) thread(t *testing.T, id string) threadOut {
	t.Helper()
	var th threadOut
	b.call(t, "GET", "/threads/"+id, "", http.StatusOK, &th)
	return th
}

// TestThreadStatusFromRuns: a thread's status and values follow its runs
// (busy while one runs, interrupted with the interrupts by task, error
// after a failure, idle after a plain end), and a search filters on it.
// A state update is refused (409) while a run is active, and otherwise
// answers the checkpoint, leaving the status as it was.
func TestThreadStatusFromRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b := newBundle(t, srv.Client(t))
	release, started := make(chan struct{}), make(chan string, 1)
	b.worker(t, fakeGraphKind(release, started))
	require.NoError(t, b.srv.stampThread(t.Context(), tid1, "agent", DefaultAssistantID("agent")))
	assert.Equal(t, "idle", b.thread(t, tid1).Status)

	b.submitGraphRun(t, tid1, "interrupt", true)
	th := b.thread(t, tid1)
	assert.Equal(t, "interrupted", th.Status)
	assert.JSONEq(t, `{"n":1}`, string(th.Values))
	require.Len(t, th.Interrupts["i1"], 1)
	assert.JSONEq(t, `{"id":"i1","value":"ok?"}`, string(th.Interrupts["i1"][0]))
	var found []threadOut
	b.call(t, "POST", "/threads/search", `{"status":"interrupted"}`, http.StatusOK, &found)
	require.Len(t, found, 1)
	b.call(t, "POST", "/threads/search", `{"values":{"n":2}}`, http.StatusOK, &found)
	assert.Empty(t, found)

	// A state update at the interrupt: answered, and the thread still
	// shows the interrupt, with the state's values now.
	b.graphs.state = json.RawMessage(`{"values":{"n":5},"next":["step"],"tasks":[]}`)
	var up map[string]json.RawMessage
	b.call(t, "POST", "/threads/"+tid1+"/state", `{"values":{"n":5},"as_node":"step"}`, http.StatusOK, &up)
	assert.JSONEq(t, `{"thread_id":"`+tid1+`","checkpoint_ns":"","checkpoint_id":"c2"}`, string(up["checkpoint"]))
	th = b.thread(t, tid1)
	assert.Equal(t, "interrupted", th.Status)
	assert.JSONEq(t, `{"n":5}`, string(th.Values))

	// A node the graph lacks is refused before any run; one the worker
	// refuses fails its run, and the thread's status stays.
	runsBefore := b.runsOf(t, tid1)
	assert.Equal(t, "Node nowhere does not exist",
		b.detail(t, "POST", "/threads/"+tid1+"/state", `{"values":{},"as_node":"nowhere"}`, http.StatusBadRequest))
	assert.Equal(t, runsBefore, b.runsOf(t, tid1), "a refused update stores no run")
	b.graphs.state = nil
	b.graphs.mu.Lock()
	b.graphs.calls = nil
	b.graphs.mu.Unlock()
	assert.Contains(t, b.detail(t, "POST", "/threads/"+tid1+"/state", `{"values":{},"as_node":"__boom"}`, http.StatusInternalServerError), "graph")
	assert.Equal(t, "interrupted", b.thread(t, tid1).Status)

	b.submitGraphRun(t, tid1, "plain", true)
	th = b.thread(t, tid1)
	assert.Equal(t, "idle", th.Status)
	assert.JSONEq(t, `{"n":7}`, string(th.Values))

	b.submitGraphRun(t, tid1, "fail", true)
	assert.Equal(t, "error", b.thread(t, tid1).Status)

	run := b.submitGraphRun(t, tid1, "block", false)
	require.Equal(t, run, <-started)
	assert.Equal(t, "busy", b.thread(t, tid1).Status)
	runsBefore = b.runsOf(t, tid1)
	assert.Equal(t, "Thread is busy", b.detail(t, "POST", "/threads/"+tid1+"/state", `{"values":{"n":9}}`, http.StatusConflict))
	assert.Equal(t, runsBefore, b.runsOf(t, tid1), "an update refused while busy stores no run")
	assert.Equal(t, "Thread is busy", b.detail(t, "DELETE", "/threads/"+tid1, "", http.StatusConflict))
	close(release)
	_, err := b.client.Wait(t.Context(), run)
	require.NoError(t, err)
	th = b.thread(t, tid1)
	assert.Equal(t, "idle", th.Status)
	assert.JSONEq(t, `{"n":2}`, string(th.Values))
	assert.Empty(t, th.Interrupts)

	code, _ := b.do(t, "DELETE", "/threads/"+tid1, "")
	assert.Equal(t, http.StatusNoContent, code)

	// A new thread's supersteps are applied, one state update each.
	b.call(t, "POST", "/threads", `{"thread_id":"`+tid2+`","metadata":{"graph_id":"agent"},
		"supersteps":[{"updates":[{"values":{"n":3},"as_node":"step"}]},{"updates":[{"values":{"n":4},"as_node":"step"}]}]}`,
		http.StatusOK, &th)
	assert.Equal(t, "idle", th.Status)
	assert.JSONEq(t, `{"n":1}`, string(th.Values), "the values the graph worker reads after the updates")
	assert.Equal(t, 2, b.runsOf(t, tid2))
}

// runsOf counts the baton runs of thread.
func (b *bundle) runsOf(t *testing.T, thread string) int {
	t.Helper()
	runs, err := b.client.ListRuns(t.Context(), client.ListOptions{Thread: thread, Limit: 1000})
	require.NoError(t, err)
	return len(runs)
}
