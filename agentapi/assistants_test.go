package agentapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

type assistantOut struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Version     int            `json:"version"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at"`
}

const aid = "44444444-4444-4444-8444-444444444444"

// TestDefaultAssistants: each graph of the project has its default
// assistant, with the reference's id (uuid5 of NAMESPACE_GRAPH and the
// graph id), found by that id or by the graph id.
func TestDefaultAssistants(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "fe096781-5601-53d2-b2f6-0d3403f7e9ca", DefaultAssistantID("agent"), "what the reference computes")
	backends(t, func(t *testing.T, b *bundle) {
		var a assistantOut
		b.call(t, "GET", "/assistants/agent", "", http.StatusOK, &a)
		assert.Equal(t, DefaultAssistantID("agent"), a.AssistantID)
		assert.Equal(t, "agent", a.GraphID)
		assert.Equal(t, "agent", a.Name)
		assert.Equal(t, 1, a.Version)
		assert.Equal(t, map[string]any{"created_by": "system"}, a.Metadata)
		var same assistantOut
		b.call(t, "GET", "/assistants/"+DefaultAssistantID("agent"), "", http.StatusOK, &same)
		assert.Equal(t, a, same)
		var n int
		b.call(t, "POST", "/assistants/count", `{}`, http.StatusOK, &n)
		assert.Equal(t, 2, n, "one per graph")

		got, err := b.srv.ResolveAssistant(t.Context(), "other")
		require.NoError(t, err)
		assert.Equal(t, "other", got.GraphID)
		_, err = b.srv.ResolveAssistant(t.Context(), aid)
		assert.True(t, IsNoAssistant(err))
	})
}

// TestAssistantLifecycle: create (if_exists), patch (a new version with
// metadata merged), versions, latest (an old version current again),
// search, count, the graph's drawing and schemas, and delete.
func TestAssistantLifecycle(t *testing.T) {
	t.Parallel()
	backends(t, assistantLifecycleFlow)
}

func assistantLifecycleFlow(t *testing.T, b *bundle) {
	var a assistantOut
	b.call(t, "POST", "/assistants", `{"assistant_id":"`+aid+`","graph_id":"agent","name":"helper",
		"config":{"configurable":{"model":"m1"}},"metadata":{"team":"a"}}`, http.StatusOK, &a)
	assert.Equal(t, aid, a.AssistantID)
	assert.Equal(t, 1, a.Version)
	assert.Equal(t, "helper", a.Name)
	assert.Nil(t, a.Description)
	assert.Equal(t, "Assistant already exists",
		b.detail(t, "POST", "/assistants", `{"assistant_id":"`+aid+`","graph_id":"agent"}`, http.StatusConflict))
	var same assistantOut
	b.call(t, "POST", "/assistants", `{"assistant_id":"`+aid+`","graph_id":"other","if_exists":"do_nothing"}`, http.StatusOK, &same)
	assert.Equal(t, a, same)

	var p assistantOut
	b.call(t, "PATCH", "/assistants/"+aid, `{"config":{"configurable":{"model":"m2"}},"metadata":{"tier":"gold"}}`, http.StatusOK, &p)
	assert.Equal(t, 2, p.Version)
	assert.Equal(t, map[string]any{"team": "a", "tier": "gold"}, p.Metadata)
	assert.Equal(t, map[string]any{"configurable": map[string]any{"model": "m2"}}, p.Config)
	assert.Equal(t, "helper", p.Name, "fields not patched stay")

	var vs []assistantOut
	b.call(t, "POST", "/assistants/"+aid+"/versions", `{}`, http.StatusOK, &vs)
	require.Len(t, vs, 2)
	assert.Equal(t, 2, vs[0].Version)
	assert.Equal(t, "m1", vs[1].Config["configurable"].(map[string]any)["model"])
	b.call(t, "POST", "/assistants/"+aid+"/versions", `{"metadata":{"tier":"gold"}}`, http.StatusOK, &vs)
	require.Len(t, vs, 1)

	var l assistantOut
	b.call(t, "POST", "/assistants/"+aid+"/latest", `{"version":1}`, http.StatusOK, &l)
	assert.Equal(t, 1, l.Version)
	assert.Equal(t, "m1", l.Config["configurable"].(map[string]any)["model"])
	assert.Equal(t, map[string]any{"team": "a"}, l.Metadata)
	assert.Equal(t, "Assistant version not found",
		b.detail(t, "POST", "/assistants/"+aid+"/latest", `{"version":7}`, http.StatusNotFound))
	b.call(t, "POST", "/assistants/"+aid+"/versions", `{}`, http.StatusOK, &vs)
	assert.Len(t, vs, 2, "latest adds no version")

	var found []assistantOut
	b.call(t, "POST", "/assistants/search", `{"graph_id":"agent"}`, http.StatusOK, &found)
	assert.Len(t, found, 2, "the default and helper")
	b.call(t, "POST", "/assistants/search", `{"name":"HELP"}`, http.StatusOK, &found)
	require.Len(t, found, 1)
	assert.Equal(t, aid, found[0].AssistantID)
	b.call(t, "POST", "/assistants/search", `{"metadata":{"created_by":"system"},"sort_by":"graph_id","sort_order":"asc"}`, http.StatusOK, &found)
	require.Len(t, found, 2)
	assert.Equal(t, "agent", found[0].GraphID)
	assert.Equal(t, "other", found[1].GraphID)
	code, _ := b.do(t, "POST", "/assistants/search", `{"limit":1}`)
	assert.Equal(t, http.StatusOK, code)
	var n int
	b.call(t, "POST", "/assistants/count", `{"graph_id":"agent"}`, http.StatusOK, &n)
	assert.Equal(t, 2, n)

	var schemas map[string]any
	b.call(t, "GET", "/assistants/"+aid+"/schemas", "", http.StatusOK, &schemas)
	assert.Equal(t, "agent", schemas["graph_id"])
	b.call(t, "GET", "/assistants/agent/graph?xray=1", "", http.StatusOK, nil)
	b.call(t, "GET", "/assistants/"+aid+"/subgraphs/inner?recurse=true", "", http.StatusOK, nil)
	assert.Equal(t, []string{`{"graph":"agent","xray":1}`}, b.graphs.asked("graph"))
	assert.Equal(t, []string{`{"graph":"agent","namespace":"inner","recurse":true}`}, b.graphs.asked("subgraphs"))

	// Deleting with delete_threads removes the threads it ran.
	require.NoError(t, b.srv.stampThread(t.Context(), tid1, "agent", aid))
	b.call(t, "POST", "/threads", `{"thread_id":"`+tid2+`"}`, http.StatusOK, nil)
	var del []string
	b.call(t, "DELETE", "/assistants/"+aid+"?delete_threads=true", "", http.StatusOK, &del)
	assert.Equal(t, []string{aid}, del)
	b.detail(t, "GET", "/assistants/"+aid, "", http.StatusNotFound)
	b.detail(t, "GET", "/threads/"+tid1, "", http.StatusNotFound)
	b.call(t, "GET", "/threads/"+tid2, "", http.StatusOK, nil)
	b.detail(t, "DELETE", "/assistants/"+aid, "", http.StatusNotFound)
}

// TestAssistantBadInput: each malformed request is answered as the
// reference answers it, naming the field, and nothing is stored.
func TestAssistantBadInput(t *testing.T) {
	t.Parallel()
	b := newBundle(t, miniClient(t))
	for _, tc := range []struct {
		method, path, body string
		code               int
		detail             string
	}{
		{"POST", "/assistants", `{"graph_id":`, 422, "not valid JSON"},
		{"POST", "/assistants", `{}`, 422, "graph_id: required"},
		{"POST", "/assistants", `{"graph_id":"nope"}`, 404, `Graph "nope" not found`},
		{"POST", "/assistants", `{"graph_id":"agent","assistant_id":"x"}`, 422, "assistant_id: invalid uuid"},
		{"POST", "/assistants", `{"graph_id":"agent","metadata":[]}`, 422, "metadata: expected an object"},
		{"POST", "/assistants", `{"graph_id":"agent","config":{"tags":"a"}}`, 422, "config.tags"},
		{"POST", "/assistants", `{"graph_id":"agent","config":{"recursion_limit":1.5}}`, 422, "config.recursion_limit"},
		{"POST", "/assistants", `{"graph_id":"agent","name":3}`, 422, "name: expected a string"},
		{"POST", "/assistants", `{"graph_id":"agent","if_exists":"replace"}`, 422, "if_exists"},
		{"GET", "/assistants/" + aid, "", 404, "Assistant not found"},
		{"GET", "/assistants/not-a-graph", "", 404, "Assistant not found"},
		{"PATCH", "/assistants/" + aid, `{}`, 404, "Assistant not found"},
		{"PATCH", "/assistants/agent", `{"graph_id":"nope"}`, 404, "Graph"},
		{"PATCH", "/assistants/agent", `{"metadata":"x"}`, 422, "metadata"},
		{"POST", "/assistants/agent/latest", `{"version":"1"}`, 422, "version: expected a number"},
		{"POST", "/assistants/agent/latest", `{}`, 422, "version: required"},
		{"POST", "/assistants/agent/versions", `{"limit":0}`, 422, "limit"},
		{"POST", "/assistants/search", `{"sort_by":"version"}`, 422, "sort_by"},
		{"POST", "/assistants/search", `{"offset":-1}`, 422, "offset"},
		{"GET", "/assistants/" + aid + "/schemas", "", 404, "Assistant not found"},
	} {
		d := b.detail(t, tc.method, tc.path, tc.body, tc.code)
		assert.Contains(t, d, tc.detail, "%s %s %s", tc.method, tc.path, tc.body)
	}
	var vs []assistantOut
	b.call(t, "POST", "/assistants/agent/versions", `{}`, http.StatusOK, &vs)
	assert.Len(t, vs, 1, "no bad patch made a version")
	var n int
	b.call(t, "POST", "/assistants/count", `{}`, http.StatusOK, &n)
	assert.Equal(t, 2, n, "no bad create stored an assistant")
}

// TestRoutesOnCluster: the thread and assistant flows on a Redis Cluster,
// where records, indexes and checkpoints of different threads live on
// different masters.
func TestRoutesOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	t.Run("threads", func(t *testing.T) { threadRecordsFlow(t, newBundle(t, c.Client())) })
	t.Run("assistants", func(t *testing.T) { assistantLifecycleFlow(t, newBundle(t, c.Client())) })
}
