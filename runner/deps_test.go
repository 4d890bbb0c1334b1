package runner_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// A diamond a -> (b, c) -> d, where d reads b's and c's committed results
// in Go, an exec node and an http node read them too, and an input
// reference picks a value out of one; d's first owner is killed, and the
// worker that takes d over sees exactly the values the first one saw.
func TestDiamondNodesReadTheirDependenciesResults(t *testing.T) {
	t.Parallel()
	b := setup(t)

	var mu sync.Mutex
	seen := map[string][]map[string]json.RawMessage{} // owner -> d's deps, per attempt
	victimHolds := make(chan struct{}, 1)
	join := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		bRes, okB := task.DepResult("b")
		cRes, okC := task.DepResult("c")
		require.True(t, okB && okC, "d reads b and c")
		_, okA := task.DepResult("a")
		require.False(t, okA, "a is not a direct dependency of d")
		mu.Lock()
		seen[task.Lease.Owner] = append(seen[task.Lease.Owner], map[string]json.RawMessage{"b": bRes, "c": cRes})
		mu.Unlock()
		if task.Lease.Owner == "w0" {
			victimHolds <- struct{}{}
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		out, _ := json.Marshal(map[string]json.RawMessage{"b": bRes, "c": cRes, "input": task.Input})
		return out, nil
	})
	produce := runner.KindFunc(func(_ context.Context, task *runner.Task) (json.RawMessage, error) {
		return json.RawMessage(`{"node":"` + task.Lease.Node + `","items":[{"url":"https://example.com/` +
			task.Lease.Node + `"}],"big":12345678901234567890}`), nil
	})
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	}))
	t.Cleanup(echo.Close)
	stock := map[string]runner.Kind{"produce": produce, "join": join,
		"exec": kinds.Exec(kinds.ExecOptions{}), "http": kinds.HTTPWith(kinds.HTTPOptions{Egress: loopbackEgress(t)})}

	victim := b.worker(b.fastConfig("w0"), stock)
	id := b.submit(`{"id":"diamond","nodes":[
		{"id":"a","kind":"produce"},
		{"id":"b","kind":"produce","deps":["a"]},
		{"id":"c","kind":"produce","deps":["a"]},
		{"id":"d","kind":"join","deps":["b","c"],"input":{"first":{"$dep":"b","path":"items.0.url"},"n":{"$dep":"c","path":"big"}}},
		{"id":"e","kind":"exec","deps":["b","c"],"input":{"command":["sh","-c","cat \"$BATON_DEPS_FILE\""]}},
		{"id":"f","kind":"http","deps":["b","c"],"input":{"url":"` + echo.URL + `","body":{"q":1}}},
		{"id":"g","kind":"http","deps":["b"],"input":{"url":"` + echo.URL + `","body":{"$dep":"b","path":"node"},"bare":true}}]}`)
	recv(t, victimHolds, 10*time.Second)
	b.worker(b.fastConfig("w1"), stock)
	victim.Kill()

	info := b.waitRun(id, 30*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)
	res := map[string]json.RawMessage{}
	for _, n := range info.Nodes {
		res[n.ID] = n.Result
	}
	both := `{"b":` + string(res["b"]) + `,"c":` + string(res["c"]) + `}`

	// Go: the taken-over d saw the same values as its killed first owner.
	mu.Lock()
	require.Len(t, seen["w0"], 1)
	require.Len(t, seen["w1"], 1)
	require.Equal(t, seen["w0"][0], seen["w1"][0], "a takeover sees the same dependency results")
	mu.Unlock()
	var d struct{ B, C, Input json.RawMessage }
	require.NoError(t, json.Unmarshal(res["d"], &d))
	require.JSONEq(t, both, `{"b":`+string(d.B)+`,"c":`+string(d.C)+`}`, "d read b's and c's results")
	require.Equal(t, `{"first":"https://example.com/b","n":12345678901234567890}`, string(d.Input),
		"references resolved, big numbers kept exactly")
	// exec: BATON_DEPS_FILE.
	require.JSONEq(t, both, string(res["e"]))
	// http: the envelope, and the bare body on request.
	require.JSONEq(t, `{"input":{"q":1},"deps":`+both+`}`, string(res["f"]))
	require.JSONEq(t, `"b"`, string(res["g"]))
}

// A reference that does not resolve fails the node permanently, naming
// the node and the reference, without running the kind.
func TestUnresolvedReferenceFailsTheNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"badref","nodes":[
		{"id":"a","kind":"work"},
		{"id":"b","kind":"work","deps":["a"],"max_attempts":3,"input":{"x":{"$dep":"a","path":"missing.0"}}}]}`)
	info := b.waitRun(id, 30*time.Second)
	require.Equal(t, "FAILED", info.Status)
	for _, n := range info.Nodes {
		if n.ID == "b" {
			require.Equal(t, int64(1), n.Attempt, "a reference that does not resolve never will")
			require.Contains(t, n.Error, `node b: input reference {"$dep":"a","path":"missing.0"}: a's result has no key "missing"`)
		}
	}
	require.Zero(t, rec.count("b"), "the kind never ran")
}

// A reference to a node that is not a direct dependency is refused at
// submit, naming the field.
func TestSubmitRefusesAReferenceOutsideTheDeps(t *testing.T) {
	t.Parallel()
	s, err := runner.ParseSpec([]byte(`{"nodes":[{"id":"a","kind":"noop"},{"id":"b","kind":"noop"},
		{"id":"c","kind":"noop","deps":["a"],"input":{"x":[{"$dep":"a"},{"$dep":"b","path":"y"}]}}]}`))
	require.NoError(t, err)
	err = s.Validate(runner.Limits{})
	require.ErrorIs(t, err, runner.ErrInvalidSpec)
	require.Contains(t, err.Error(), `nodes[2].input: refers to "b" ({"$dep": ...}), which is not in its deps`)
	require.NotContains(t, err.Error(), `"a"`)
}

// loopbackEgress lets an http kind reach the tests' servers on 127.0.0.1,
// as EGRESS_ALLOW does for a runner.
func loopbackEgress(t *testing.T) *egress.Policy {
	t.Helper()
	p, err := egress.Parse("EGRESS_ALLOW", "127.0.0.1")
	require.NoError(t, err)
	return p
}
