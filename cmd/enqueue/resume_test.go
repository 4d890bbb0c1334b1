package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A parked node is shown by status and answered through the CLI: the
// answer is printed, a second resume prints the first answer, a node that
// is not waiting is refused (exit 1) and a value that is not JSON is bad
// input (exit 2), with the node still waiting.
func TestResumeAParkedNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.submit(t, `{"id": "ok-1", "nodes": [{"id": "ask", "kind": "noop"}, {"id": "go", "kind": "noop", "deps": ["ask"]}]}`)
	store := b.client.Store()
	c, err := store.Claim(ctx, fence.NodeRef{Thread: run, Run: run, Node: "ask"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Park(ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"ship it?"}`)})
	require.NoError(t, err)

	r := b.run(t, "", "status", run)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `waiting for a resume: node ask asks {"ask":"ship it?"}`)
	require.Contains(t, r.stdout, "WAITING")

	r = b.run(t, "", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `ok-1\s+RUNNING \(1 waiting\)`, r.stdout)

	r = b.run(t, "", "resume", run, "ask", "--value", "{nope")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "--value")
	require.Equal(t, "WAITING", states(b.status(t, run))["ask"])
	r = b.run(t, "", "resume", run, "go", "--value", "1")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "not waiting")

	r = b.run(t, "", "resume", run, "ask", "--value", `"yes"`)
	require.Equal(t, 0, r.code, r.stderr)
	var answer fence.Answer
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &answer))
	require.JSONEq(t, `"yes"`, string(answer.Value))
	require.NotEmpty(t, answer.Wait, "the wait it answered")
	require.Equal(t, "READY", states(b.status(t, run))["ask"])
	r = b.run(t, "", "list")
	require.NotContains(t, r.stdout, "waiting")
	r = b.run(t, "", "resume", run, "ask", "--value", `"no"`, "--wait", "nope")
	require.Equal(t, 1, r.code, "another wait: refused")
	r = b.run(t, "", "resume", run, "ask", "--value", `"no"`)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "answered already")
	var first fence.Answer
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &first))
	require.Equal(t, answer, first, "the first answer stands")

	// A wait never answered, in a run cancelled since: refused, exit 1.
	run2 := b.submit(t, `{"id": "ok-2", "nodes": [{"id": "ask", "kind": "noop"}]}`)
	c2, err := store.Claim(ctx, fence.NodeRef{Thread: run2, Run: run2, Node: "ask"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Park(ctx, c2.Lease, fence.Wait{Request: []byte(`1`)})
	require.NoError(t, err)
	r = b.run(t, "", "cancel", run2)
	require.Equal(t, 0, r.code, r.stderr)
	r = b.run(t, "", "resume", run2, "ask", "--value", "true")
	require.Equal(t, 1, r.code, r.stderr)
	require.Equal(t, "CANCELLED", states(b.status(t, run2))["ask"])
}

// A wait that timed out was answered by its timeout, as its park said: a
// resume through the CLI then returns that answer and changes nothing.
func TestResumeAfterTheWaitTimedOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	store := b.client.Store()
	for _, tc := range []struct {
		run, on, want string
	}{
		{"to-default", "resume", `"value":"auto"`},
		{"to-fail", "fail", `"error":"wait`},
	} {
		run := b.submit(t, `{"id": "`+tc.run+`", "nodes": [{"id": "ask", "kind": "noop"}]}`)
		c, err := store.Claim(ctx, fence.NodeRef{Thread: run, Run: run, Node: "ask"}, "w1", time.Minute, 0)
		require.NoError(t, err)
		_, err = store.Park(ctx, c.Lease, fence.Wait{Request: []byte(`1`), Timeout: 50 * time.Millisecond,
			OnTimeout: tc.on, Default: []byte(`"auto"`)})
		require.NoError(t, err)
		require.Eventually(t, func() bool { // the sweeper's pass, once Redis's clock passed the timeout
			done, err := store.TimeOutWaits(ctx, "test", 10)
			return err == nil && len(done) > 0
		}, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, "READY", states(b.status(t, run))["ask"])
		r := b.run(t, "", "resume", run, "ask", "--value", `"late"`)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stderr, "answered already")
		require.Contains(t, r.stdout, tc.want, tc.run)
	}
}
