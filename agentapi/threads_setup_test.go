package agentapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// fakeGraphs stands in for the graph workers (package langgraph's Kind):
// it knows graphs "agent" and "other" and answers each op with a canned
// reply, recording what it was asked.
type fakeGraphs struct {
	mu    sync.Mutex
	calls []string
	state json.RawMessage // get_state's answer
}

func (f *fakeGraphs) IDs() []string { return []string{"agent", "other"} }

func (f *fakeGraphs) Call(_ context.Context, op string, args any) (json.RawMessage, error) {
	a, _ := json.Marshal(args)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op+" "+string(a))
	if strings.Contains(string(a), missingCheckpoint) {
		return nil, codedError{http.StatusNotFound, "no checkpoint " + missingCheckpoint}
	}
	switch op {
	case "get_state":
		if f.state != nil {
			return f.state, nil
		}
		return json.RawMessage(`{"values":{"n":1},"next":[],"tasks":[],"checkpoint":{"checkpoint_id":"c1"}}`), nil
	case "history":
		return json.RawMessage(`[{"values":{"n":1},"next":[]}]`), nil
	case "graph":
		return json.RawMessage(`{"nodes":[{"id":"__start__"},{"id":"step"},{"id":"__end__"}],"edges":[]}`), nil
	case "schemas":
		return json.RawMessage(`{"graph_id":"agent","input_schema":{},"output_schema":{},"state_schema":{},"config_schema":{},"context_schema":{}}`), nil
	case "subgraphs":
		return json.RawMessage(`{}`), nil
	}
	return nil, fmt.Errorf("fake graphs: unknown op %q", op)
}

func (f *fakeGraphs) asked(op string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, op+" ") {
			out = append(out, strings.TrimPrefix(c, op+" "))
		}
	}
	return out
}

// bundle is one API server over one Redis.
type bundle struct {
	rdb    redis.UniversalClient
	client *client.Client
	graphs *fakeGraphs
	srv    *Server
	url    string
}

func newBundle(t *testing.T, rdb redis.UniversalClient) *bundle {
	t.Helper()
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	g := &fakeGraphs{}
	s, err := New(Config{Client: c, Graphs: g, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return &bundle{rdb: rdb, client: c, graphs: g, srv: s, url: hs.URL}
}

// backends runs f on miniredis and on a real redis-server.
func backends(t *testing.T, f func(t *testing.T, b *bundle)) {
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) { f(t, newBundle(t, be.Client)) })
	}
}

// do sends a request and returns the status and body.
func (b *bundle) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

// call sends a request, requires the status and decodes the body into out.
func (b *bundle) call(t *testing.T, method, path, body string, want int, out any) {
	t.Helper()
	code, raw := b.do(t, method, path, body)
	require.Equal(t, want, code, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
}

// detail sends a request that must fail with code and returns its detail.
func (b *bundle) detail(t *testing.T, method, path, body string, want int) string {
	t.Helper()
	var e struct {
		Detail string `json:"detail"`
	}
	b.call(t, method, path, body, want, &e)
	return e.Detail
}

// worker runs a "graph" kind in-process on b's Redis: kind answers each
// attempt.
func (b *bundle) worker(t *testing.T, kind runner.KindFunc) {
	t.Helper()
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.rdb, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	w.Register("graph", kind)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Shutdown)
}

type threadOut struct {
	ThreadID   string                       `json:"thread_id"`
	CreatedAt  string                       `json:"created_at"`
	UpdatedAt  string                       `json:"updated_at"`
	Metadata   map[string]any               `json:"metadata"`
	Status     string                       `json:"status"`
	Values     json.RawMessage              `json:"values"`
	Interrupts map[string][]json.RawMessage `json:"interrupts"`
}

// miniClient is a fresh miniredis's client.
func miniClient(t *testing.T) redis.UniversalClient {
	t.Helper()
	_, c := redistest.Mini(t)
	return c
}

// missingCheckpoint is a checkpoint the fake graph workers do not have.
const missingCheckpoint = "55555555-5555-4555-8555-555555555555"

// codedError is a graph worker's failure with its HTTP status, as
// langgraph.CallError carries one.
type codedError struct {
	code int
	msg  string
}

func (e codedError) Error() string   { return e.msg }
func (e codedError) StatusCode() int { return e.code }
