package agentapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/langgraph"
)

// realGraphProject writes a two-node LangGraph project: plan -> write.
func realGraphProject(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"langgraph.json": `{"graphs": {"agent": "./agent.py:graph", "ask": "./ask.py:graph"}}`,
		"ask.py": `from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

class State(TypedDict):
    answer: str

def ask(state):
    return {"answer": interrupt("ok?")}

builder = StateGraph(State)
builder.add_node("ask", ask)
builder.add_edge(START, "ask")
builder.add_edge("ask", END)
graph = builder.compile()
`,
		"agent.py": `import operator
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph

class State(TypedDict):
    topic: str
    steps: Annotated[list[str], operator.add]

def plan(state):
    return {"steps": ["plan " + state["topic"]]}

def write(state):
    return {"steps": ["write"]}

builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("write", write)
builder.add_edge(START, "plan")
builder.add_edge("plan", "write")
builder.add_edge("write", END)
graph = builder.compile()
`,
	}
	for name, text := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	return filepath.Join(dir, "langgraph.json")
}

// TestThreadsOnARealGraphWorker drives the threads routes over package
// langgraph's graph workers, a real Python LangGraph graph: a run's state
// and history, a state update, the assistant's schemas and drawing. It
// needs LANGGRAPH_PYTHON (an interpreter with langgraph; the repository's
// python/ is put on PYTHONPATH) and a langgraph.Kind that answers
// Graphs.Call (the workers branch); without either it skips.
func TestThreadsOnARealGraphWorker(t *testing.T) {
	py := os.Getenv("LANGGRAPH_PYTHON")
	if py == "" {
		t.Skip("LANGGRAPH_PYTHON is not set")
	}
	if err := exec.Command(py, "-c", "import langgraph").Run(); err != nil {
		t.Skipf("%s cannot import langgraph: %v", py, err)
	}
	_, file, _, _ := runtime.Caller(0)
	t.Setenv("PYTHONPATH", filepath.Join(filepath.Dir(file), "..", "python"))
	srv := redistest.Start(t)
	p, err := langgraph.Load(realGraphProject(t))
	require.NoError(t, err)
	kind, err := langgraph.New(p, langgraph.Options{Python: py, RedisURL: srv.URL(), Env: []string{"PYTHONPATH"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(kind.Close)
	graphs, ok := any(kind).(Graphs)
	if !ok {
		t.Skip("langgraph.Kind does not answer Graphs.Call yet")
	}
	require.NoError(t, kind.Start(t.Context()))

	b := newBundle(t, srv.Client(t))
	b.srv.cfg.Graphs = graphs
	b.worker(t, kind.Run)
	require.NoError(t, b.srv.stampThread(t.Context(), tid1, "agent", DefaultAssistantID("agent")))

	input, _ := json.Marshal(map[string]any{"graph": "agent", "input": map[string]string{"topic": "x"}, "interrupts": "end"})
	run := newID()
	submitRaw(t, b, run, tid1, input)
	th := b.thread(t, tid1)
	assert.Equal(t, "idle", th.Status)
	assert.JSONEq(t, `{"topic":"x","steps":["plan x","write"]}`, string(th.Values))

	var st struct {
		Values map[string]any `json:"values"`
		Next   []string       `json:"next"`
	}
	b.call(t, "GET", "/threads/"+tid1+"/state", "", http.StatusOK, &st)
	assert.Equal(t, []any{"plan x", "write"}, st.Values["steps"])
	assert.Empty(t, st.Next)

	var up struct {
		Checkpoint map[string]any `json:"checkpoint"`
	}
	b.call(t, "POST", "/threads/"+tid1+"/state", `{"values":{"steps":["edited"]},"as_node":"write"}`, http.StatusOK, &up)
	assert.Equal(t, tid1, up.Checkpoint["thread_id"])
	b.call(t, "GET", "/threads/"+tid1+"/state", "", http.StatusOK, &st)
	assert.Equal(t, []any{"plan x", "write", "edited"}, st.Values["steps"])
	assert.Equal(t, "Node nowhere does not exist",
		b.detail(t, "POST", "/threads/"+tid1+"/state", `{"values":{},"as_node":"nowhere"}`, http.StatusBadRequest))

	var hist []map[string]any
	b.call(t, "POST", "/threads/"+tid1+"/history", `{"limit":2}`, http.StatusOK, &hist)
	require.Len(t, hist, 2)
	var schemas map[string]any
	b.call(t, "GET", "/assistants/agent/schemas", "", http.StatusOK, &schemas)
	assert.Equal(t, "agent", schemas["graph_id"])
	var drawing struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	b.call(t, "GET", "/assistants/agent/graph", "", http.StatusOK, &drawing)
	var ids []string
	for _, n := range drawing.Nodes {
		ids = append(ids, n.ID)
	}
	assert.Contains(t, strings.Join(ids, ","), "plan")

	// An interrupt() ends the API's run: the thread is interrupted, with
	// the interrupt, and a state update there leaves it so.
	require.NoError(t, b.srv.stampThread(t.Context(), tid2, "ask", DefaultAssistantID("ask")))
	input, _ = json.Marshal(map[string]any{"graph": "ask", "input": map[string]string{}, "interrupts": "end"})
	submitRaw(t, b, newID(), tid2, input)
	th = b.thread(t, tid2)
	assert.Equal(t, "interrupted", th.Status)
	require.Len(t, th.Interrupts, 1)
	for _, list := range th.Interrupts {
		require.Len(t, list, 1)
		var in map[string]any
		require.NoError(t, json.Unmarshal(list[0], &in))
		assert.Equal(t, "ok?", in["value"])
	}
	b.call(t, "POST", "/threads/"+tid2+"/state", `{"values":{"answer":"pre"}}`, http.StatusOK, &up)
	th = b.thread(t, tid2)
	assert.Equal(t, "interrupted", th.Status)
	assert.JSONEq(t, `{"answer":"pre"}`, string(th.Values))
}
