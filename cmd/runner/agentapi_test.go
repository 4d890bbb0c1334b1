package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// graphEnv is a runner's environment serving the Agent Server API's test
// project (agentapi/testdata) with the repository's Python virtualenv.
func graphEnv(t *testing.T, redisURL string) map[string]string {
	t.Helper()
	py, err := filepath.Abs(filepath.Join("..", "..", "python", ".venv", "bin", "python"))
	require.NoError(t, err)
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("BATON_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s is missing and BATON_REQUIRE_PYTHON is set", py)
		}
		t.Skipf("%s is missing: this test needs Python with LangGraph", py)
	}
	pkg, err := filepath.Abs(filepath.Join("..", "..", "python"))
	require.NoError(t, err)
	project, err := filepath.Abs(filepath.Join("..", "..", "agentapi", "testdata", "project", "langgraph.json"))
	require.NoError(t, err)
	return map[string]string{"REDIS_URL": redisURL, "ADMIN_ADDR": "127.0.0.1:0", "LANGGRAPH_CONFIG": project,
		"LANGGRAPH_PYTHON": py, "PYTHONPATH": pkg, "EXEC_ENV": "PYTHONPATH"}
}

// With LANGGRAPH_CONFIG, the runner serves the Agent Server API; when its
// default port is taken (2024 is, on these machines), it takes a free one
// and logs where, and an SDK's wait answers there.
func TestAgentAPIDefaultPortTakenFallsBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	env := graphEnv(t, srv.URL())
	if ln, err := net.Listen("tcp", "127.0.0.1:2024"); err == nil {
		defer ln.Close() // hold it, as the system service does elsewhere
	}
	p := start(t, env)
	rec := p.waitLog(t, "agent_api_listening")
	url, _ := rec["url"].(string)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), "%v", rec)
	assert.NotEqual(t, "http://127.0.0.1:2024", url)
	assert.Contains(t, p.log(), `"msg":"agent_api_port_taken"`)
	p.waitLog(t, "runner_ready")
	resp, err := http.Post(url+"/runs/wait", "application/json",
		strings.NewReader(`{"assistant_id": "chat", "input": {"topic": "port"}}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"topic": "port", "steps": ["plan port", "write"]}`, string(body))
	assert.Equal(t, exitOK, p.exitAfter(t, syscall.SIGTERM))
}

// An AGENT_API_ADDR the user chose that is taken fails the start, naming
// the setting.
func TestExplicitAgentAPIAddrTakenFails(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	env := graphEnv(t, srv.URL())
	env["AGENT_API_ADDR"] = ln.Addr().String()
	code, stderr := exitOf(t, env)
	assert.Equal(t, exitFailed, code, stderr)
	assert.Contains(t, stderr, "AGENT_API_ADDR "+ln.Addr().String()+" is in use")
}
