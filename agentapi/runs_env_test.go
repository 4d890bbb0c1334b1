package agentapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/agentapi"
	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/langgraph"
	"github.com/batonrun/baton/runner"
)

// legacyFields are the graph node input fields the graph kind reads
// before the API's own fields land in package langgraph.
var legacyFields = []string{"graph", "input", "command", "config", "stream_mode"}

// graphs is the API's view of the test project until package langgraph's
// Kind answers worker calls itself.
type graphs struct{ ids []string }

func (g graphs) IDs() []string { return g.ids }
func (g graphs) Call(context.Context, string, any) (json.RawMessage, error) {
	return nil, errors.New("graph worker calls are not served yet")
}

// env is a real redis-server, a real runner serving testdata/project's
// Python graphs in a warm worker, and the API in front of them.
type env struct {
	url    string
	client *client.Client
	api    *agentapi.Server
}

// python is the interpreter with LangGraph (python/.venv).
func python(t *testing.T) string {
	p, err := filepath.Abs(filepath.Join("..", "python", ".venv", "bin", "python"))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("BATON_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s is missing and BATON_REQUIRE_PYTHON is set", p)
		}
		t.Skipf("%s is missing: these tests need Python with LangGraph", p)
	}
	return p
}

func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// setup starts the env; limits bound its streams. The test's caller must
// not be parallel (it sets PYTHONPATH for the graph worker).
func setup(t *testing.T, limits agentapi.StreamLimits) *env {
	t.Helper()
	py := python(t)
	pkg, err := filepath.Abs(filepath.Join("..", "python"))
	require.NoError(t, err)
	t.Setenv("PYTHONPATH", pkg)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)

	p, err := langgraph.Load(filepath.Join("testdata", "project", "langgraph.json"))
	require.NoError(t, err)
	kind, err := langgraph.New(p, langgraph.Options{Python: py, RedisURL: srv.URL(), Env: []string{"PYTHONPATH"},
		Logger: quietLogger(t), StopGrace: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, kind.Start(t.Context()))
	t.Cleanup(kind.Close)
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, Concurrency: 8, PollInterval: 5 * time.Millisecond,
		Logger: quietLogger(t)})
	require.NoError(t, err)
	w.Register(langgraph.KindName, kind)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)

	var ids []string
	for id := range p.Graphs {
		ids = append(ids, id)
	}
	api, err := agentapi.New(agentapi.Config{Client: c, Graphs: graphs{ids}, Logger: quietLogger(t),
		Streams: limits, GraphInputFields: legacyFields})
	require.NoError(t, err)
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	return &env{url: hs.URL, client: c, api: api}
}

// call sends a request with a JSON body (when body is not "") and returns
// the status, headers and body.
func (e *env) call(t *testing.T, method, path, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// jsonOf decodes b into a map.
func jsonOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "body %s", b)
	return m
}

// sse is one Server-Sent Event as the SDKs parse it.
type sse struct{ id, event, data string }

// sseStream reads a response's events.
type sseStream struct {
	resp *http.Response
	sc   *bufio.Scanner
	// comments counts the comment lines (": heartbeat") read.
	comments int
}

// openStream sends a request whose answer is a stream.
func (e *env) openStream(t *testing.T, ctx context.Context, method, path, body string, header ...string) *sseStream {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	return &sseStream{resp: resp, sc: sc}
}

// next returns the next event; false at the stream's end.
func (s *sseStream) next() (sse, bool) {
	var ev sse
	seen := false
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if seen {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			s.comments++
		case strings.HasPrefix(line, "id: "):
			ev.id, seen = line[4:], true
		case strings.HasPrefix(line, "event: "):
			ev.event, seen = line[7:], true
		case strings.HasPrefix(line, "data: "):
			if ev.data != "" {
				ev.data += "\n" // a second data line: the test fails on it
			}
			ev.data, seen = ev.data+line[6:], true
		}
	}
	return ev, false
}

// all reads every event up to the stream's end.
func (s *sseStream) all() []sse {
	var out []sse
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// events lists the events' names.
func events(evs []sse) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.event
	}
	return out
}

var threadSeq atomic.Int64
