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

// graphIDs is a project of fixed graph ids whose worker answers no call,
// for tests where no graph runs.
type graphIDs []string

func (g graphIDs) IDs() []string { return g }
func (g graphIDs) Call(context.Context, string, any) (json.RawMessage, error) {
	return nil, errors.New("no graph worker in this test")
}

// runsEnv is a real redis-server, a real runner serving testdata/project's
// Python graphs in a warm worker, and the API in front of them.
type runsEnv struct {
	url    string
	client *client.Client
	api    *agentapi.Server
	graphs agentapi.Graphs
}

// runsPython is the interpreter with LangGraph (python/.venv).
func runsPython(t *testing.T) string {
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

func runsLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// runsSetup starts the env; limits bound its streams. The test's caller must
// not be parallel (it sets PYTHONPATH for the graph worker).
func runsSetup(t *testing.T, limits agentapi.StreamLimits) *runsEnv {
	t.Helper()
	py := runsPython(t)
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
		Logger: runsLogger(t), StopGrace: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, kind.Start(t.Context()))
	t.Cleanup(kind.Close)
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, Concurrency: 8, PollInterval: 5 * time.Millisecond,
		Logger: runsLogger(t)})
	require.NoError(t, err)
	w.Register(langgraph.KindName, kind)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)

	api, err := agentapi.New(agentapi.Config{Client: c, Graphs: kind, Logger: runsLogger(t), Streams: limits})
	require.NoError(t, err)
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	return &runsEnv{url: hs.URL, client: c, api: api, graphs: kind}
}

// call sends a request with a JSON body (when body is not "") and returns
// the status, headers and body.
func (e *runsEnv) call(t *testing.T, method, path, body string, header ...string) (int, http.Header, []byte) {
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

// runsJSON decodes b into a map.
func runsJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "body %s", b)
	return m
}

// runsSSE is one Server-Sent Event as the SDKs parse it.
type runsSSE struct{ id, event, data string }

// runsSSEStream reads the events of a response.
type runsSSEStream struct {
	resp *http.Response
	sc   *bufio.Scanner
	// comments counts the comment lines (": heartbeat") read.
	comments int
}

// openStream sends a request whose answer is a stream.
func (e *runsEnv) openStream(t *testing.T, ctx context.Context, method, path, body string, header ...string) *runsSSEStream {
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
	return &runsSSEStream{resp: resp, sc: sc}
}

// next returns the next event; false at the stream's end.
func (s *runsSSEStream) next() (runsSSE, bool) {
	var ev runsSSE
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
func (s *runsSSEStream) all() []runsSSE {
	var out []runsSSE
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// runsEventNames lists the events' names.
func runsEventNames(evs []runsSSE) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.event
	}
	return out
}

var runsThreadSeq atomic.Int64
