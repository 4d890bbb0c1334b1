package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A FAILED run retried through the CLI SUCCEEDS, and its SUCCEEDED node
// does not run again. The runner's retention has packed the FAILED run
// into one key by then (its sweep does so at once, as for a run that
// SUCCEEDED); the retry writes it back, and its whole history stays.
func TestRetriedRunSucceedsWithoutRerunningItsSuccesses(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	ran, ok := filepath.Join(dir, "ran"), filepath.Join(dir, "ok")
	mark := fmt.Sprintf(`echo "$BATON_NODE_ID" >> %q; `, ran)
	a := sh(mark + `echo '{"a":1}'`)
	b := sh(mark + fmt.Sprintf(`[ -f %q ] || exit 3; echo '{"b":2}'`, ok))
	c.startRunner("r0", nil)
	run := c.submit(`{"id": "retried", "nodes": [{"id": "a", "kind": "exec", "input": ` + a + `},
		{"id": "b", "kind": "exec", "deps": ["a"], "max_attempts": 1, "input": ` + b + `},
		{"id": "c", "kind": "exec", "deps": ["b"], "input": ` + a + `}]}`)
	require.Equal(t, 1, c.watch(run))
	require.Equal(t, "FAILED", c.status(run).Status)
	rdb := c.redis.Client(t)
	waitUntil(t, 10*time.Second, "the retention to pack the FAILED run", func() bool {
		n, err := rdb.Exists(t.Context(), fence.Keys{}.Packed(run, run)).Result()
		require.NoError(t, err)
		return n == 1
	})
	before := c.events(run)
	require.Equal(t, "FAILED", c.status(run).Status, "read from its packed key")

	require.NoError(t, os.WriteFile(ok, nil, 0o600))
	out, errOut, code := c.enqueue("", "retry", run)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "RUNNING\n", out)
	require.Equal(t, 0, c.watch(run), "the retried run SUCCEEDED")
	st := c.status(run)
	require.JSONEq(t, `{"a":1}`, string(st.node("a").Result))
	require.JSONEq(t, `{"b":2}`, string(st.node("b").Result))
	log, err := os.ReadFile(ran)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "b", "c"}, strings.Fields(string(log)), "a ran once")
	require.Equal(t, before, c.events(run)[:len(before)], "the history from before the retry, whole")
}

// start_in: 2s starts no node before 2 s on Redis's clock: started_at and
// created_at are both Redis times.
func TestStartInThroughTheBinaries(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startRunner("r0", nil)
	run := c.submit(`{"id": "later", "start_in": "2s", "nodes": [{"id": "a", "kind": "noop"}]}`)
	require.Equal(t, 0, c.watch(run))
	out, errOut, code := c.enqueue("", "status", run, "--json")
	require.Equal(t, 0, code, errOut)
	var s struct {
		CreatedAt time.Time `json:"created_at"`
		Nodes     []struct {
			StartedAt time.Time `json:"started_at"`
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.GreaterOrEqual(t, s.Nodes[0].StartedAt.Sub(s.CreatedAt), 2*time.Second)
}

// A run's "timeout" cancels what is left of it once it has passed: the
// running exec child is stopped, the node not started yet is cancelled,
// and every surface says why. Before that, status says when it will.
func TestRunTimeoutThroughTheBinaries(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startRunner("r0", nil)
	run := c.submit(`{"id": "bounded", "timeout": "3s", "nodes": [
		{"id": "slow", "kind": "exec", "input": ` + sh(`sleep 60`) + `},
		{"id": "after", "kind": "exec", "deps": ["slow"], "input": ` + sh(`echo never`) + `}]}`)
	out, errOut, code := c.enqueue("", "status", run)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "timeout 3s: what is left is cancelled at ")

	begin := time.Now()
	require.NotEqual(t, 0, c.watch(run), "a run its timeout cancelled did not succeed")
	require.Less(t, time.Since(begin), 30*time.Second, "the sleeping child was stopped, not waited for")
	st := c.status(run)
	require.Equal(t, "CANCELLED", st.Status)
	require.Equal(t, "CANCELLED", st.node("after").State, "the node not started is cancelled")
	out, errOut, code = c.enqueue("", "status", run, "--json")
	require.Equal(t, 0, code, errOut)
	var s struct {
		CancelReason string     `json:"cancel_reason"`
		Timeout      string     `json:"timeout"`
		Deadline     *time.Time `json:"deadline"`
		CreatedAt    time.Time  `json:"created_at"`
		FinishedAt   time.Time  `json:"finished_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, "timeout 3s passed", s.CancelReason)
	require.Equal(t, "3s", s.Timeout)
	require.Nil(t, s.Deadline, "a fired timeout has no deadline left")
	require.GreaterOrEqual(t, s.FinishedAt.Sub(s.CreatedAt), 3*time.Second, "nothing was cancelled before the timeout, on Redis's clock")

	// A run that ends in time is left alone.
	quick := c.submit(`{"id": "in-time", "timeout": "1m", "nodes": [{"id": "a", "kind": "noop"}]}`)
	require.Equal(t, 0, c.watch(quick))
	require.Equal(t, "SUCCEEDED", c.status(quick).Status)
}
