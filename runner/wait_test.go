package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// approval parks its node asking for approval, unless the node was
// resumed: then its result is the answer. wait shapes the wait from the
// node's input ({"timeout_ms", "on_timeout", "default"}).
func approval() runner.Kind {
	return runner.KindFunc(func(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
		if v, ok := t.ResumeValue(); ok {
			return json.RawMessage(`{"approved":` + string(v) + `}`), nil
		}
		var in struct {
			TimeoutMS int64           `json:"timeout_ms"`
			OnTimeout string          `json:"on_timeout"`
			Default   json.RawMessage `json:"default"`
		}
		_ = json.Unmarshal(t.Input, &in)
		return nil, runner.Park(runner.Wait{Request: json.RawMessage(`{"ask":"deploy v2?"}`),
			Timeout: time.Duration(in.TimeoutMS) * time.Millisecond, OnTimeout: in.OnTimeout, Default: in.Default})
	})
}

func (b *testBundle) waitState(run, node, state string) *fence.NodeInfo {
	b.t.Helper()
	var got *fence.NodeInfo
	waitFor(b.t, 10*time.Second, run+"/"+node+" "+state, func() bool {
		info, err := b.client.Status(context.Background(), run)
		require.NoError(b.t, err)
		for i := range info.Nodes {
			if info.Nodes[i].ID == node && info.Nodes[i].State == state {
				got = &info.Nodes[i]
				return true
			}
		}
		return false
	})
	return got
}

// A node that asks a person parks: WAITING with its request, holding no
// lease and no worker, across a restart of every runner; a resume with a
// value finishes the run with that value, once; a second resume returns
// the first answer; a node not waiting and a cancelled run refuse a resume.
func TestParkAndResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.worker(b.fastConfig("w1"), map[string]runner.Kind{"approve": approval(), "step": newRecorder()})
	b.submit(`{"id":"deploy","nodes":[{"id":"ask","kind":"approve"},{"id":"ship","kind":"step","deps":["ask"]}]}`)
	n := b.waitState("deploy", "ask", "WAITING")
	require.NotNil(t, n.Wait)
	require.JSONEq(t, `{"ask":"deploy v2?"}`, string(n.Wait.Request))
	require.Nil(t, n.LeaseUntil, "no lease held")
	require.Equal(t, n.Attempt, n.Releases, "no attempt counted")
	require.Equal(t, "RUNNING", b.waitRunStatus("deploy"))

	_, err := b.client.Resume(ctx, "deploy", "ship", "", json.RawMessage(`true`))
	require.ErrorIs(t, err, fence.ErrNotWaiting, "ship is BLOCKED, not waiting")

	// Every runner restarts while the node waits.
	first.Shutdown()
	b.worker(b.fastConfig("w2"), map[string]runner.Kind{"approve": approval(), "step": newRecorder()})

	res, err := b.client.Resume(ctx, "deploy", "ask", "", json.RawMessage(`"yes"`))
	require.NoError(t, err)
	require.False(t, res.Replay)
	info := b.waitRun("deploy", 10*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.JSONEq(t, `{"approved":"yes"}`, string(info.Nodes[0].Result))

	again, err := b.client.Resume(ctx, "deploy", "ask", n.Wait.ID, json.RawMessage(`"no"`))
	require.NoError(t, err)
	require.True(t, again.Replay)
	require.JSONEq(t, `"yes"`, string(again.Answer.Value), "the first answer stands")
	require.Equal(t, 1, countEvents(b.events("deploy"), "resumed")["ask"])

	// A cancelled run's waiting node is CANCELLED at once; a resume is refused.
	b.submit(`{"id":"deploy-2","nodes":[{"id":"ask","kind":"approve"}]}`)
	b.waitState("deploy-2", "ask", "WAITING")
	_, err = b.client.Cancel(ctx, "deploy-2", "")
	require.NoError(t, err)
	require.Equal(t, "CANCELLED", b.waitRun("deploy-2", 10*time.Second).Status)
	_, err = b.client.Resume(ctx, "deploy-2", "ask", "", json.RawMessage(`true`))
	require.True(t, errors.Is(err, fence.ErrNotWaiting) || errors.Is(err, fence.ErrRunDone), "%v", err)

	// Bad input: a value that is not JSON; an unknown node.
	_, err = b.client.Resume(ctx, "deploy", "ask", "", json.RawMessage(`{nope`))
	require.ErrorIs(t, err, fence.ErrInvalidData)
	_, err = b.client.Resume(ctx, "nope", "ask", "", json.RawMessage(`1`))
	require.ErrorIs(t, err, fence.ErrNotFound)
}

// A wait with a timeout ends as its park said: "fail" fails the node
// without running it again; "resume" resumes it with the default value.
func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"approve": approval()})
	b.submit(`{"id":"t-fail","nodes":[{"id":"ask","kind":"approve","input":{"timeout_ms":200}}]}`)
	b.submit(`{"id":"t-default","nodes":[{"id":"ask","kind":"approve",
		"input":{"timeout_ms":200,"on_timeout":"resume","default":"auto"}}]}`)
	failed := b.waitRun("t-fail", 10*time.Second)
	require.Equal(t, "FAILED", failed.Status)
	require.Contains(t, failed.Nodes[0].Error, "wait timed out")
	resumed := b.waitRun("t-default", 10*time.Second)
	require.Equal(t, "SUCCEEDED", resumed.Status)
	require.JSONEq(t, `{"approved":"auto"}`, string(resumed.Nodes[0].Result))
}

func (b *testBundle) waitRunStatus(id string) string {
	b.t.Helper()
	info, err := b.client.Status(context.Background(), id)
	require.NoError(b.t, err)
	return info.Status
}

// An exec command parks its node with a ::wait line and exits 0; after a
// resume, its next attempt reads the value from BATON_RESUME_FILE. A ::wait
// line that is not JSON fails the node, saying so.
func TestExecWaitsForAResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"exec": kinds.Exec(kinds.ExecOptions{})})
	b.submit(`{"id":"ex","nodes":[{"id":"ask","kind":"exec","input":{"command":["sh","-c",
		"if [ -n \"$BATON_RESUME_FILE\" ]; then printf '{\"answer\":%s,\"wait\":\"%s\"}' \"$(cat $BATON_RESUME_FILE)\" \"$BATON_RESUME_WAIT_ID\"; else echo '::wait {\"ask\":\"ok?\"}'; fi"]}}]}`)
	n := b.waitState("ex", "ask", "WAITING")
	require.JSONEq(t, `{"ask":"ok?"}`, string(n.Wait.Request))
	_, err := b.client.Resume(ctx, "ex", "ask", "", json.RawMessage(`{"ok":true}`))
	require.NoError(t, err)
	info := b.waitRun("ex", 10*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.JSONEq(t, `{"answer":{"ok":true},"wait":"`+n.Wait.ID+`"}`, string(info.Nodes[0].Result))

	b.submit(`{"id":"ex-bad","nodes":[{"id":"ask","kind":"exec","input":{"command":["sh","-c","echo '::wait {nope'"]}}]}`)
	bad := b.waitRun("ex-bad", 10*time.Second)
	require.Equal(t, "FAILED", bad.Status)
	require.Contains(t, bad.Nodes[0].Error, "::wait line is not JSON")
}
