package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// Status tells the truth, the same in the table, the JSON and the events:
// a WAITING node has no owner; the attempt number is the one the events
// give (after a park, and after a shutdown's hand-off), with what counts
// against max_attempts beside it; a node that succeeded on a later
// attempt shows no earlier attempt's error; a parked event carries the
// request as JSON.
func TestStatusTellsTheTruthAboutWaitsAndAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.submit(t, `{"id": "truth", "nodes": [{"id": "ask", "kind": "noop", "max_attempts": 3},
		{"id": "moved", "kind": "noop", "max_attempts": 3}, {"id": "flaky", "kind": "noop", "max_attempts": 3}]}`)
	store := b.client.Store()
	ref := func(n string) fence.NodeRef { return fence.NodeRef{Thread: run, Run: run, Node: n} }

	c, err := store.Claim(ctx, ref("ask"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Park(ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"ship it?"}`)})
	require.NoError(t, err)

	// A SIGTERM hand-off: w1 releases, w2 takes the next attempt.
	c, err = store.Claim(ctx, ref("moved"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Release(ctx, c.Lease, "shutdown")
	require.NoError(t, err)
	_, err = store.Claim(ctx, ref("moved"), "w2", time.Minute, 0)
	require.NoError(t, err)

	c, err = store.Claim(ctx, ref("flaky"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Fail(ctx, c.Lease, fence.Failure{Err: "Traceback (most recent call last):\n  boom"}, c.Descendants)
	require.NoError(t, err)
	c, err = store.Claim(ctx, ref("flaky"), "w2", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Commit(ctx, c.Lease, []byte(`"ok"`), c.Dependents)
	require.NoError(t, err)

	r := b.run(t, "", "status", run)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^ask\s+WAITING\s+1 \(0/3 used\)\s+1\s+-\s+0%\s+-\s+-$`, r.stdout, "no owner; attempt 1, none used")
	require.Regexp(t, `(?m)^moved\s+RUNNING\s+2 \(1/3 used\)\s+2\s+w2\s`, r.stdout)
	require.Regexp(t, `(?m)^flaky\s+SUCCEEDED\s+2/3\s+2\s+w2\s+100%\s+"ok"\s+-$`, r.stdout, "no earlier attempt's error")

	r = b.run(t, "", "status", run, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var s struct {
		Nodes []struct {
			ID           string `json:"id"`
			Attempt      int64  `json:"attempt"`
			AttemptsUsed int64  `json:"attempts_used"`
			Owner        string `json:"owner"`
			Error        string `json:"error"`
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &s))
	byID := map[string]int{}
	for i, n := range s.Nodes {
		byID[n.ID] = i
	}
	ask, moved, flaky := s.Nodes[byID["ask"]], s.Nodes[byID["moved"]], s.Nodes[byID["flaky"]]
	require.Empty(t, ask.Owner, "a WAITING node has no owner")
	require.Equal(t, int64(1), ask.Attempt)
	require.Zero(t, ask.AttemptsUsed)
	require.Equal(t, int64(2), moved.Attempt)
	require.Equal(t, int64(1), moved.AttemptsUsed)
	require.Empty(t, flaky.Error)

	r = b.run(t, "", "events", run, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	claimed := map[string]string{}
	var request json.RawMessage
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct {
			Type    string                     `json:"type"`
			Node    string                     `json:"node"`
			Details map[string]json.RawMessage `json:"details"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		if e.Type == "claimed" {
			var a string
			require.NoError(t, json.Unmarshal(e.Details["attempt"], &a))
			claimed[e.Node] = a
		}
		if e.Type == "parked" {
			request = e.Details["request"]
		}
	}
	require.Equal(t, "1", claimed["ask"])
	require.Equal(t, "2", claimed["moved"], "the events' attempt is the status's")
	require.JSONEq(t, `{"ask":"ship it?"}`, string(request))
	require.True(t, strings.HasPrefix(string(request), "{"), "the request as JSON, not a string of it: %s", request)
}

// A resume says what is wrong by name: a node the run lacks, another
// node's wait id (bad input, exit 2), a run that was cancelled; and a
// retry of a run whose node still waits is refused naming the node.
func TestResumeAndRetrySayWhatIsWrong(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.submit(t, `{"id": "named", "nodes": [{"id": "a", "kind": "noop"}, {"id": "b", "kind": "noop"}]}`)
	store := b.client.Store()
	ref := func(n string) fence.NodeRef { return fence.NodeRef{Thread: run, Run: run, Node: n} }
	c, err := store.Claim(ctx, ref("a"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Park(ctx, c.Lease, fence.Wait{Request: []byte(`1`)})
	require.NoError(t, err)
	c, err = store.Claim(ctx, ref("b"), "w1", time.Minute, 0)
	require.NoError(t, err)
	pb, err := store.Park(ctx, c.Lease, fence.Wait{Request: []byte(`2`)})
	require.NoError(t, err)

	r := b.run(t, "", "resume", run, "badnode", "--value", "1")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "run named has no node badnode")
	require.NotContains(t, r.stderr, "not found")

	r = b.run(t, "", "resume", run, "a", "--wait", pb.WaitID, "--value", "1")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "wait_id")
	require.Contains(t, r.stderr, "node b")

	r = b.run(t, "", "retry", run)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "node a waits for a resume")
	require.Equal(t, map[string]string{"a": "WAITING", "b": "WAITING"}, states(b.status(t, run)), "nothing changed")

	r = b.run(t, "", "cancel", run)
	require.Equal(t, 0, r.code, r.stderr)
	r = b.run(t, "", "resume", run, "a", "--value", "1")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "run named was cancelled")
}
