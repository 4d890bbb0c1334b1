package agentapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/agentapi"
	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/redistest"
)

// A run is one submit whose graph node input carries every field the API
// shows later and the graph worker reads, so a run reads back as created
// (no worker runs here: the run stays pending).
func TestRunInputCarriesEveryField(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	api, err := agentapi.New(agentapi.Config{Client: c, Graphs: graphIDs{"chat"}, Logger: runsLogger(t)})
	require.NoError(t, err)
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)

	body := `{"assistant_id": "chat", "input": {"topic": "t"}, "context": {"user": "u"}, "metadata": {"team": "a"},
		"interrupt_before": ["write"], "interrupt_after": "*", "checkpoint": {"checkpoint_id": "cp-1"},
		"stream_mode": ["updates", "messages-tuple"], "stream_subgraphs": true, "command": {"resume": "yes"},
		"config": {"tags": ["x"], "configurable": {"model": "m"}}, "multitask_strategy": "enqueue",
		"unknown_field": 1, "durability": "sync", "if_not_exists": "create"}`
	resp, err := http.Post(hs.URL+"/threads/11111111-1111-4111-8111-111111111111/runs", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var run map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&run))
	assert.Equal(t, "pending", run["status"])
	assert.Equal(t, "eb6db400-e3c8-5d06-a834-015cb89efe69", run["assistant_id"])
	// The run's metadata as the reference merges it: the assistant's
	// (a default one's created_by), the thread's stamp, the run's own.
	meta := map[string]any{"team": "a", "created_by": "system", "graph_id": "chat",
		"assistant_id": "eb6db400-e3c8-5d06-a834-015cb89efe69"}
	assert.Equal(t, meta, run["metadata"])
	assert.Equal(t, "enqueue", run["multitask_strategy"])
	kw := run["kwargs"].(map[string]any)
	assert.Equal(t, map[string]any{"user": "u"}, kw["context"])
	assert.Equal(t, "cp-1", kw["checkpoint_id"])
	assert.Equal(t, true, kw["subgraphs"])

	in, err := c.Store().NodeInput(t.Context(), run["run_id"].(string), "graph")
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(in, &got))
	cfg := got["config"].(map[string]any)
	assert.Equal(t, meta, cfg["metadata"], "metadata reaches the graph's config.metadata")
	assert.Equal(t, []any{"x"}, cfg["tags"])
	conf := cfg["configurable"].(map[string]any)
	assert.Equal(t, "m", conf["model"])
	assert.Equal(t, run["run_id"], conf["run_id"])
	assert.Equal(t, "chat", conf["graph_id"])
	delete(got, "config")
	assert.Equal(t, map[string]any{
		"graph": "chat", "input": map[string]any{"topic": "t"}, "command": map[string]any{"resume": "yes"},
		"stream_mode": []any{"updates", "messages-tuple"}, "context": map[string]any{"user": "u"},
		"interrupt_before": []any{"write"}, "interrupt_after": "*", "checkpoint_id": "cp-1", "subgraphs": true,
		"assistant_id": "eb6db400-e3c8-5d06-a834-015cb89efe69", "metadata": meta,
		"interrupts": "end", "resumes": []any{},
	}, got)
}
