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
)

// A FAILED run retried through the CLI SUCCEEDS, and its SUCCEEDED node
// does not run again.
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
