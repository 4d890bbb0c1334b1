package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/bintest"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// binary is the runner built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	bintest.Main(m, func(dir string) { binary = filepath.Join(dir, "runner") }, ".")
}

// proc is one runner process and what it logged.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited and its stderr was read

	mu    sync.Mutex
	lines []string
	added chan struct{} // signalled on every new line
}

// baseEnv is what every runner under test sees: nothing of the test's own
// environment but PATH, and JSON logs to read.
func baseEnv(extra map[string]string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "LOG_FORMAT=json", "LOG_LEVEL=debug"}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// exitOf runs the binary to its end and returns its exit status and stderr.
func exitOf(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = baseEnv(env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("runner %v did not exit; stderr:\n%s", args, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func start(t *testing.T, env map[string]string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...), done: make(chan struct{}), added: make(chan struct{}, 1)}
	p.cmd.Env = baseEnv(env)
	startProc(t, p)
	return p
}

// startProc starts p's command, collecting its stderr lines.
func startProc(t *testing.T, p *proc) {
	t.Helper()
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.added <- struct{}{}:
			default:
			}
		}
		_ = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill() // no-op once it exited
		<-p.done
		if t.Failed() {
			t.Logf("runner stderr:\n%s", p.log())
		}
	})
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLog waits for a log record with msg and returns it.
func (p *proc) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(15 * time.Second)
	seen := 0
	for {
		p.mu.Lock()
		lines := p.lines[seen:]
		seen = len(p.lines)
		p.mu.Unlock()
		for _, l := range lines {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
				return rec
			}
		}
		select {
		case <-p.added:
		case <-p.done:
			p.mu.Lock()
			more := len(p.lines) > seen
			p.mu.Unlock()
			if !more {
				t.Fatalf("runner exited before logging %s", msg)
			}
		case <-deadline:
			t.Fatalf("no %s logged within 15s", msg)
		}
	}
}

// exitAfter sends sig and returns the exit status once the process ends.
func (p *proc) exitAfter(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	return p.exit(t)
}

func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(20 * time.Second):
		t.Fatalf("runner did not exit")
		return -1
	}
}

// Invalid configuration exits 2 before touching Redis, listing every
// problem. REDIS_URL points at a closed port: a runner that got as far as
// connecting would exit 1 instead.
func TestBinaryRefusesBadConfig(t *testing.T) {
	t.Parallel()
	closed := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	cases := []struct {
		name string
		env  map[string]string
		says []string
	}{
		{"lease shorter than three heartbeats",
			map[string]string{"LEASE_TTL": "3s", "HEARTBEAT_INTERVAL": "2s"},
			[]string{"LEASE_TTL 3s must be at least 3 × HEARTBEAT_INTERVAL 2s"}},
		{"public admin address without a token",
			map[string]string{"ADMIN_ADDR": "0.0.0.0:8080"},
			[]string{"ADMIN_ADDR 0.0.0.0:8080 is not a loopback address", "API_TOKEN is empty"}},
		{"every problem at once",
			map[string]string{"LEASE_TTL": "3s", "HEARTBEAT_INTERVAL": "2s", "ADMIN_ADDR": ":9000", "CONCURRENCY": "-1", "LOG_FORMAT": "yaml"},
			[]string{"HEARTBEAT_INTERVAL 2s", "ADMIN_ADDR :9000", "CONCURRENCY -1", `LOG_FORMAT "yaml"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.env["REDIS_URL"] = closed
			code, stderr := exitOf(t, tc.env)
			assert.Equal(t, exitUsage, code, stderr)
			assert.Contains(t, stderr, "invalid configuration")
			for _, s := range tc.says {
				assert.Contains(t, stderr, s)
			}
		})
	}

	t.Run("unreachable redis is a failure, not a usage error", func(t *testing.T) {
		t.Parallel()
		code, stderr := exitOf(t, map[string]string{"REDIS_URL": closed, "ADMIN_ADDR": ""})
		assert.Equal(t, exitFailed, code, stderr)
		assert.Contains(t, stderr, "runner_failed")
	})
}

func TestBinaryFlags(t *testing.T) {
	t.Parallel()
	code, stderr := exitOf(t, nil, "--no-such-flag")
	assert.Equal(t, exitUsage, code, stderr)
	code, stderr = exitOf(t, nil, "submit", "x.json")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "unexpected arguments")
	code, stderr = exitOf(t, nil, "-h")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "LEASE_TTL")
	assert.Contains(t, stderr, "--embedded")
	code, stderr = exitOf(t, nil, "--version")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "runner ")
}

// --embedded needs no Redis: the runner serves the API, runs a node with a
// stock kind, and drains on SIGTERM with exit 0.
func TestBinaryEmbedded(t *testing.T) {
	t.Parallel()
	const token = "embedded-test-token-0123"
	p := start(t, map[string]string{"ADMIN_ADDR": "127.0.0.1:0", "API_TOKEN": token,
		"REDIS_URL": "redis://127.0.0.1:1/0", "DISPATCHERS": "2", "POLL_INTERVAL": "25ms"}, "--embedded")
	started := p.waitLog(t, "worker_started")
	assert.EqualValues(t, 2, started["dispatchers"], "DISPATCHERS reaches the worker")
	assert.EqualValues(t, 25*time.Millisecond, started["poll_interval"], "POLL_INTERVAL reaches the worker")
	rec := p.waitLog(t, "admin_listening")
	base := "http://" + rec["addr"].(string)
	assert.Equal(t, base+"/monitor/", rec["monitor"], "the UI's URL is logged")

	call := func(method, path, body string) (int, []byte) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	code, body := call("POST", "/v1/runs", `{"id": "emb-1", "nodes": [
		{"id": "nap", "kind": "sleep", "input": {"duration": "10ms"}},
		{"id": "done", "kind": "noop", "deps": ["nap"]}]}`)
	require.Equal(t, http.StatusCreated, code, "%s", body)

	var info fence.RunInfo
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body := call("GET", "/v1/runs/emb-1", "")
		require.Equal(c, http.StatusOK, code)
		require.NoError(c, json.Unmarshal(body, &info))
		assert.Equal(c, "SUCCEEDED", info.Status)
	}, 15*time.Second, 20*time.Millisecond, "polling the run's status: the user-visible signal")
	assert.JSONEq(t, `{"slept": "10ms"}`, string(info.Nodes[0].Result))

	code, body = call("GET", "/metrics", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, string(body), "baton_commits_total 2")

	assert.Equal(t, exitOK, p.exitAfter(t, syscall.SIGTERM))
	assert.Contains(t, p.log(), `"msg":"runner_stopped"`)
}

// SIGTERM releases a running node for another worker to resume at once:
// the node is READY again, its attempt not counted as failed, and the
// runner exits 0 long before the node would have finished.
func TestBinaryShutdownReleasesRunningNode(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := newClient(t, srv)
	p := start(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": "", "RUNNER_ID": "w-shutdown"})
	p.waitLog(t, "runner_ready")

	submit(t, client, `{"id": "long", "nodes": [{"id": "nap", "kind": "sleep", "input": {"duration": "10m"}}]}`)
	waitNode(t, client, "long", "RUNNING")

	assert.Equal(t, exitOK, p.exitAfter(t, syscall.SIGTERM))
	info, err := client.Status(t.Context(), "long")
	require.NoError(t, err)
	assert.Equal(t, "READY", info.Nodes[0].State, "released, not left to expire")
	assert.Equal(t, "RUNNING", info.Status)
	evs, err := client.Events(t.Context(), "long", "", 0)
	require.NoError(t, err)
	var released bool
	for _, e := range evs {
		released = released || (e.Type == "released" && e.Worker == "w-shutdown")
	}
	assert.True(t, released, "a released event names the worker")
}

// A second signal does not wait for a node that ignores SIGTERM: the
// runner exits 1 at once and lease expiry recovers the node.
func TestBinarySecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := newClient(t, srv)
	p := start(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": "", "SHUTDOWN_TIMEOUT": "60s"})
	p.waitLog(t, "runner_ready")

	pidFile := filepath.Join(t.TempDir(), "pid")
	spec, err := json.Marshal(map[string]any{"id": "stubborn", "nodes": []any{map[string]any{
		"id": "n", "kind": "exec", "max_attempts": 1,
		"input": map[string]any{"command": []string{"sh", "-c", `trap "" TERM; echo $$ > "$1"; exec sleep 30`, "sh", pidFile}},
	}}})
	require.NoError(t, err)
	submit(t, client, string(spec))
	pgid := waitPid(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }) // the orphaned command

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.waitLog(t, "worker_stopping")
	assert.Equal(t, exitFailed, p.exitAfter(t, syscall.SIGTERM))
	assert.Contains(t, p.log(), "second_signal_exiting_now")
	assert.NotContains(t, p.log(), `"msg":"runner_stopped"`)
}

func newClient(t *testing.T, srv *redistest.Server) *runner.Client {
	t.Helper()
	c, err := runner.NewClient(runner.ClientConfig{Redis: srv.Client(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func submit(t *testing.T, c *runner.Client, spec string) {
	t.Helper()
	s, err := runner.ParseSpec([]byte(spec))
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), s)
	require.NoError(t, err)
}

// waitNode polls the run until its first node reaches state.
func waitNode(t *testing.T, c *runner.Client, run, state string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		info, err := c.Status(t.Context(), run)
		require.NoError(ct, err)
		assert.Equal(ct, state, info.Nodes[0].State)
	}, 15*time.Second, 10*time.Millisecond)
}

// waitPid waits for the command to write its pid: from then on it ignores
// SIGTERM.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b, err := os.ReadFile(path)
		if !assert.NoError(c, err) || !assert.True(c, bytes.HasSuffix(b, []byte("\n"))) {
			return
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		assert.NoError(c, err)
	}, 15*time.Second, 10*time.Millisecond)
	return pid
}
