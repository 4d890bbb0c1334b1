package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/bintest"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// binary is the enqueue command built once for the package's tests, which
// run it as a real process, as scripts do.
var binary string

func TestMain(m *testing.M) {
	bintest.Main(m, func(dir string) { binary = filepath.Join(dir, "enqueue") }, ".")
}

// testBundle is one test's Redis, the environment the command runs with,
// and a client standing in for workers.
type testBundle struct {
	srv    *redistest.Server
	env    []string
	client *runner.Client
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	srv := redistest.Start(t)
	client, err := runner.NewClient(runner.ClientConfig{Redis: srv.Client(t)})
	require.NoError(t, err)
	return &testBundle{srv: srv, env: testEnv("REDIS_URL=" + srv.URL()), client: client}
}

// testEnv is the process environment without the command's own settings,
// plus extra. It has no spare capacity: parallel subtests that append to
// it get arrays of their own.
func testEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "REDIS_") || k == "BATON_PREFIX" || k == "MAX_INPUT_BYTES" || k == "BATON_LOG_LEVEL" {
			continue
		}
		env = append(env, kv)
	}
	return slices.Clip(append(env, extra...))
}

type result struct {
	stdout, stderr string
	code           int
}

// enqueue runs the binary to completion with env and stdin.
func enqueue(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "enqueue %v did not finish; stderr:\n%s", args, stderr.String())
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "enqueue %v: %v", args, err)
		r.code = ee.ExitCode()
	}
	return r
}

func (b *testBundle) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return enqueue(t, b.env, stdin, args...)
}

// submit submits spec on stdin and returns the printed run id.
func (b *testBundle) submit(t *testing.T, spec string) string {
	t.Helper()
	r := b.run(t, spec, "submit", "-")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Equal(t, 1, strings.Count(r.stdout, "\n"), "stdout holds only the run id: %q", r.stdout)
	return strings.TrimSpace(r.stdout)
}

// statusJSON is `status --json` decoded into the documented shape.
type statusJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Thread string `json:"thread"`
	Nodes  []struct {
		ID       string          `json:"id"`
		State    string          `json:"state"`
		Attempt  int64           `json:"attempt"`
		Epoch    int64           `json:"epoch"`
		Owner    string          `json:"owner"`
		Progress int             `json:"progress"`
		Result   json.RawMessage `json:"result"`
		Error    string          `json:"error"`
	} `json:"nodes"`
}

func (b *testBundle) status(t *testing.T, run string) statusJSON {
	t.Helper()
	r := b.run(t, "", "status", run, "--json")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw), r.stdout)
	for _, k := range []string{"id", "status", "nodes"} {
		require.Contains(t, raw, k)
	}
	var nodes []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw["nodes"], &nodes))
	for _, n := range nodes {
		for _, k := range []string{"id", "state", "attempt", "epoch", "owner", "progress", "result", "error"} {
			require.Contains(t, n, k, "node %s", n["id"])
		}
	}
	var s statusJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	return s
}

func states(s statusJSON) map[string]string {
	m := map[string]string{}
	for _, n := range s.Nodes {
		m[n.ID] = n.State
	}
	return m
}

// finish plays a worker: it claims and commits every node of run, in
// dependency order, until the run SUCCEEDED.
func (b *testBundle) finish(t *testing.T, run string) {
	t.Helper()
	ctx := context.Background()
	store := b.client.Store()
	for range 1000 {
		info, err := b.client.Status(ctx, run)
		require.NoError(t, err)
		if info.Status != "RUNNING" {
			require.Equal(t, "SUCCEEDED", info.Status)
			return
		}
		thread := cmp.Or(info.Thread, run)
		for _, n := range info.Nodes {
			if n.State != "READY" {
				continue
			}
			c, err := store.Claim(ctx, fence.NodeRef{Thread: thread, Run: run, Node: n.ID}, "test-worker", time.Minute, 0)
			require.NoError(t, err)
			_, err = store.Commit(ctx, c.Lease, []byte(`{"ok":true}`), c.Dependents)
			require.NoError(t, err)
		}
	}
	t.Fatalf("run %s did not finish", run)
}

// started is a running enqueue process whose stdout is read line by line.
type started struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	cancel context.CancelFunc
}

// start runs the binary in the background; wait must be called.
func (b *testBundle) start(t *testing.T, args ...string) *started {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = b.env
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	p := &started{cmd: cmd, lines: make(chan string, 1000), stderr: &stderr, cancel: cancel}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(cancel)
	return p
}

// next returns the next stdout line.
func (p *started) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "stdout closed; stderr: %s", p.stderr)
		return l
	case <-time.After(15 * time.Second):
		t.Fatalf("no output line; stderr: %s", p.stderr)
		return ""
	}
}

// wait reads the rest of stdout and returns it with the exit status.
func (p *started) wait(t *testing.T) ([]string, int) {
	t.Helper()
	var rest []string
	for l := range p.lines {
		rest = append(rest, l)
	}
	err := p.cmd.Wait()
	p.cancel()
	if err == nil {
		return rest, 0
	}
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "%v", err)
	require.True(t, ee.Exited(), "killed (timeout?): %v; stderr: %s", err, p.stderr)
	return rest, ee.ExitCode()
}
