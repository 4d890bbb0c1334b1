package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// routedRun: fetch (exec, on any runner) -> sum (summarize, only the Go
// program has it; its input refers to fetch's result) -> report (exec,
// reads both results from BATON_DEPS_FILE).
func routedRun(id string) string {
	return fmt.Sprintf(`{"id": %q, "nodes": [
		{"id": "fetch", "kind": "exec", "input": {"command": ["sh", "-c", "echo '{\"url\": \"https://example.com/%s\", \"n\": 3}'"]}},
		{"id": "sum", "kind": "summarize", "deps": ["fetch"], "max_attempts": 1,
		 "input": {"url": {"$dep": "fetch", "path": "url"}}},
		{"id": "report", "kind": "exec", "deps": ["fetch", "sum"], "input": {"command": ["sh", "-c", "cat \"$BATON_DEPS_FILE\""]}}]}`,
		id, id)
}

// A mixed fleet through the binaries: stock runner processes and a Go
// program with its own kind, on one Redis. A run submitted before the Go
// program starts is accepted with a warning and waits, saying why; it runs
// once the program starts, and then every run succeeds, each node in one
// attempt, results flowing from node to node.
func TestMixedFleetOfBinariesRoutesAndPassesResults(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startRunner("stock-1", nil)
	c.startRunner("stock-2", nil)

	out, errOut, code := c.enqueue("", "workers", "--json")
	require.Equal(t, 0, code, errOut)
	var live []fence.WorkerInfo
	require.NoError(t, json.Unmarshal([]byte(out), &live))
	require.Len(t, live, 2)
	require.Equal(t, "stock-1", live[0].ID)
	require.Equal(t, []string{"exec", "http", "noop", "sleep"}, live[0].Kinds)

	out, errOut, code = c.enqueue(routedRun("early"), "submit", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "early\n", out)
	require.Contains(t, errOut, "warning: no runner serves kind summarize on queue default")

	var waiting string
	waitUntil(t, 30*time.Second, "sum to wait for a runner", func() bool {
		out, _, _ := c.enqueue("", "status", "early", "--json")
		var s struct {
			Nodes []struct{ ID, State, Waiting string }
		}
		require.NoError(t, json.Unmarshal([]byte(out), &s), out)
		for _, n := range s.Nodes {
			if n.ID == "sum" && n.State == "READY" {
				waiting = n.Waiting
				return true
			}
		}
		return false
	})
	require.Equal(t, "waiting: no runner serves kind summarize on queue default", waiting)

	// The Go program starts: the waiting node runs.
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: c.redis.Client(t), ID: "go-program",
		SweepInterval: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	kinds.RegisterStock(w)
	w.Register("summarize", runner.KindFunc(func(_ context.Context, task *runner.Task) (json.RawMessage, error) {
		var in struct{ URL string }
		if err := json.Unmarshal(task.Input, &in); err != nil {
			return nil, runner.Permanent(err)
		}
		fetched, _ := task.DepResult("fetch")
		return json.Marshal(map[string]any{"summary": "read " + in.URL, "fetched": fetched})
	}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)
	require.Equal(t, 0, c.watch("early"))

	ids := []string{"early"}
	for i := range 20 {
		ids = append(ids, c.submit(routedRun(fmt.Sprintf("mixed-%d", i))))
	}
	for _, id := range ids {
		require.Equal(t, 0, c.watch(id), "run %s succeeded", id)
		s := c.status(id)
		for _, n := range s.Nodes {
			require.Equal(t, "SUCCEEDED", n.State, "%s/%s", id, n.ID)
			require.Equal(t, int64(1), n.Attempt, "%s/%s ran in one attempt", id, n.ID)
		}
		fetch := `{"url": "https://example.com/` + id + `", "n": 3}`
		require.JSONEq(t, `{"summary": "read https://example.com/`+id+`", "fetched": `+fetch+`}`,
			string(s.node("sum").Result))
		require.JSONEq(t, `{"fetch": `+fetch+`, "sum": `+string(s.node("sum").Result)+`}`,
			string(s.node("report").Result))
	}
	require.Contains(t, c.enqueueOut(t, "workers"), "go-program", "the Go program is listed")
}

func (c *cluster) enqueueOut(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := c.enqueue("", args...)
	require.Equal(t, 0, code, errOut)
	return out
}

// A mistyped kind: enqueue submit stores the run with a warning that
// suggests the kind meant; --require-served refuses it, storing nothing,
// with the same suggestion on the node's field (exit 2).
func TestStrictSubmitRefusesAKindNoRunnerServes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startRunner("stock-1", nil)
	waitUntil(t, 30*time.Second, "the runner to advertise its kinds", func() bool {
		out, _, _ := c.enqueue("", "workers")
		return strings.Contains(out, "stock-1")
	})
	typo := `{"id": "typo", "nodes": [{"id": "a", "kind": "noop"}, {"id": "b", "kind": "exce", "deps": ["a"]}]}`
	out, errOut, code := c.enqueue(typo, "submit", "--require-served", "-")
	require.Equal(t, 2, code, errOut)
	require.Empty(t, out)
	require.Equal(t, "enqueue: stdin: nodes[1].kind: no runner serves kind exce on queue default (did you mean exec?); nothing stored\n", errOut)
	_, errOut, code = c.enqueue("", "status", "typo")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not found", "nothing was stored")

	out, errOut, code = c.enqueue(typo, "submit", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "typo\n", out)
	require.Contains(t, errOut, "warning: no runner serves kind exce on queue default (did you mean exec?)")

	out, errOut, code = c.enqueue(`{"id": "fine", "nodes": [{"id": "a", "kind": "noop"}]}`, "submit", "--require-served", "-")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "fine\n", out)
	require.Equal(t, 0, c.watch("fine"))
}
