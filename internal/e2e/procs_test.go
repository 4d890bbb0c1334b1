package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/bintest"
	"github.com/batonrun/baton/internal/redistest"
)

var binDir string

func TestMain(m *testing.M) {
	if os.Getenv(otelChildEnv) != "" {
		os.Exit(otelChild()) // this binary run as an exec node's command
	}
	bintest.Main(m, func(dir string) { binDir = dir },
		"github.com/batonrun/baton/cmd/runner", "github.com/batonrun/baton/cmd/enqueue")
}

// cluster is the Redis of a test and the runner and enqueue processes it
// starts: one redis-server (redis set), or a Redis Cluster (see
// newRedisCluster), reached through env.
type cluster struct {
	t     *testing.T
	redis *redistest.Server
	// env selects the Redis deployment for every process started:
	// REDIS_URL, or REDIS_CLUSTER_ADDRS and REDIS_PASSWORD.
	env []string
}

func newCluster(t *testing.T) *cluster {
	r := redistest.Start(t)
	return &cluster{t: t, redis: r, env: []string{"REDIS_URL=" + r.URL()}}
}

// runnerProc is a runner binary running as a child process.
type runnerProc struct {
	id    string
	cmd   *exec.Cmd
	admin string // host:port
	log   *syncBuffer
	done  chan struct{}
	err   error // after done
}

// syncBuffer collects a process's output for assertions and failure logs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fastEnv makes leases short enough to watch them expire in a test.
var fastEnv = map[string]string{
	"LEASE_TTL": "2s", "HEARTBEAT_INTERVAL": "500ms", "GRACE": "300ms",
	"SWEEP_INTERVAL": "200ms", "SHUTDOWN_TIMEOUT": "5s", "LOG_LEVEL": "debug",
}

// startRunner starts a runner process with fastEnv plus env and waits until
// its admin server answers /readyz.
func (c *cluster) startRunner(id string, env map[string]string) *runnerProc {
	c.t.Helper()
	p := &runnerProc{id: id, admin: fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(c.t)), log: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(binDir, "runner"))
	p.cmd.Env = append(append(os.Environ(), c.env...), "RUNNER_ID="+id, "ADMIN_ADDR="+p.admin)
	for k, v := range fastEnv {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(c.t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
		if c.t.Failed() {
			c.t.Logf("runner %s output:\n%s", id, p.log.String())
		}
	})
	waitUntil(c.t, 30*time.Second, "runner "+id+" ready", func() bool {
		select {
		case <-p.done:
			c.t.Fatalf("runner %s exited at start: %v\n%s", id, p.err, p.log.String())
		default:
		}
		resp, err := http.Get("http://" + p.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

func (p *runnerProc) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(s))
}

// exitCode waits for the process to exit and returns its code.
func (p *runnerProc) exitCode(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("runner %s did not exit within %s", p.id, timeout)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// enqueue runs the enqueue CLI and returns stdout, stderr and exit code.
func (c *cluster) enqueue(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "enqueue"), args...)
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("enqueue %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func (c *cluster) submit(spec string) string {
	c.t.Helper()
	out, errOut, code := c.enqueue(spec, "submit", "-")
	require.Equal(c.t, 0, code, "submit: %s", errOut)
	return strings.TrimSpace(out)
}

type nodeStatus struct {
	ID       string          `json:"id"`
	State    string          `json:"state"`
	Attempt  int64           `json:"attempt"`
	Epoch    int64           `json:"epoch"`
	Owner    string          `json:"owner"`
	Progress int             `json:"progress"`
	Result   json.RawMessage `json:"result"`
	Error    string          `json:"error"`
}

type runStatus struct {
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Nodes   []nodeStatus `json:"nodes"`
	TraceID string       `json:"trace_id"`
}

func (c *cluster) status(run string) runStatus {
	c.t.Helper()
	out, errOut, code := c.enqueue("", "status", run, "--json")
	require.Equal(c.t, 0, code, "status: %s", errOut)
	var s runStatus
	require.NoError(c.t, json.Unmarshal([]byte(out), &s), out)
	return s
}

func (s runStatus) node(id string) nodeStatus {
	for _, n := range s.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nodeStatus{}
}

type event struct {
	Type    string  `json:"type"`
	Node    string  `json:"node"`
	Epoch   int64   `json:"epoch"`
	Worker  string  `json:"worker"`
	Details details `json:"details"`
}

// details are an event's details as text: a string as itself, any other
// value (a parked node's request) as its JSON.
type details map[string]string

func (d *details) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*d = details{}
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		(*d)[k] = s
	}
	return nil
}

func (c *cluster) events(run string) []event {
	c.t.Helper()
	out, errOut, code := c.enqueue("", "events", run, "--json")
	require.Equal(c.t, 0, code, "events: %s", errOut)
	var evs []event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e event
		require.NoError(c.t, json.Unmarshal([]byte(line), &e), line)
		evs = append(evs, e)
	}
	return evs
}

// watch waits for the run to end through the CLI and returns its exit code.
func (c *cluster) watch(run string) int {
	c.t.Helper()
	_, _, code := c.enqueue("", "watch", run, "--interval", "100ms")
	return code
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond) // polling the condition under test
	}
}

func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func readPid(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
