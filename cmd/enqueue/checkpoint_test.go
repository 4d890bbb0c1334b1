package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// checkpointed submits a run of one node on thread, claims the node as a
// worker would, saves each of datas as a checkpoint in ns, and returns the
// claim's lease.
func (b *testBundle) checkpointed(t *testing.T, run, thread, ns string, datas ...string) fence.Lease {
	t.Helper()
	ctx := context.Background()
	b.submit(t, fmt.Sprintf(`{"id": %q, "thread": %q, "nodes": [{"id": "a", "kind": "noop"}]}`, run, thread))
	store := b.client.Store()
	c, err := store.Claim(ctx, fence.NodeRef{Thread: thread, Run: run, Node: "a"}, "test-worker", time.Minute, 0)
	require.NoError(t, err)
	for _, d := range datas {
		_, err := store.SaveCheckpoint(ctx, c.Lease, fence.CheckpointWrite{NS: ns, Data: json.RawMessage(d)})
		require.NoError(t, err)
	}
	return c.Lease
}

func TestCheckpointPrintsTheNewestOrTheHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.checkpointed(t, "talk-1", "conv", "a", `{"step": 1}`, `{"step": 2}`, `{"step": 3, "done": true}`)

	// --json: the documented keys, data as the JSON saved.
	r := b.run(t, "", "checkpoint", "conv", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	for _, k := range []string{"version", "id", "data", "run", "node", "epoch", "at"} {
		require.Contains(t, got, k)
	}
	require.JSONEq(t, `{"step": 3, "done": true}`, string(got["data"]))
	require.Equal(t, "3", string(got["version"]))
	require.Equal(t, `"talk-1"`, string(got["run"]))
	require.Equal(t, `"a"`, string(got["node"]))
	require.Equal(t, "1", string(got["epoch"]))
	var at time.Time
	require.NoError(t, json.Unmarshal(got["at"], &at))
	require.WithinDuration(t, time.Now(), at, time.Minute)
	require.True(t, strings.HasSuffix(string(got["at"]), `Z"`), "at is UTC: %s", got["at"])

	// Text: who saved it, then the data as saved.
	r = b.run(t, "", "checkpoint", "conv", "--ns", "a")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], `thread conv  ns "a"  version 3  run talk-1  node a  epoch 1  worker test-worker`)
	require.Equal(t, `{"step": 3, "done": true}`, lines[2])

	// --all: newest first, one JSON object per line, or a table.
	r = b.run(t, "", "checkpoint", "conv", "--all", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var versions []int64
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var cp fence.Checkpoint
		require.NoError(t, json.Unmarshal([]byte(line), &cp), line)
		versions = append(versions, cp.Version)
	}
	require.Equal(t, []int64{3, 2, 1}, versions)
	r = b.run(t, "", "checkpoint", "conv", "--all")
	require.Equal(t, 0, r.code, r.stderr)
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^VERSION\s+EPOCH\s+RUN\s+NODE\s+WORKER\s+AT\s+DATA$`, lines[0])
	require.Regexp(t, `^3\s+1\s+talk-1\s+a\s+test-worker\s+\S+Z\s+\{"step": 3, "done": true\}$`, lines[1])
}

func TestCheckpointAndThreadExitCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.checkpointed(t, "talk-1", "conv", "a", `{"step": 1}`)
	b.submit(t, `{"id": "empty", "nodes": [{"id": "a", "kind": "noop"}]}`)
	// Two namespaces on one thread.
	l := b.checkpointed(t, "two", "two", "left", `1`)
	_, err := b.client.Store().SaveCheckpoint(context.Background(), l, fence.CheckpointWrite{NS: "", Data: json.RawMessage(`2`)})
	require.NoError(t, err)

	for _, tc := range []struct {
		args []string
		code int
		says string // on stderr
	}{
		{[]string{"checkpoint", "nope"}, 1, "thread nope not found"},
		{[]string{"checkpoint", "nope", "--ns", "a"}, 1, `thread nope ns "a": no checkpoint`},
		{[]string{"checkpoint", "conv", "--ns", "b"}, 1, `thread conv ns "b": no checkpoint`},
		{[]string{"checkpoint", "conv", "--ns", "b", "--all"}, 1, `thread conv ns "b": no checkpoint`},
		{[]string{"checkpoint", "empty"}, 1, "thread empty has no checkpoint"},
		{[]string{"checkpoint", "bad{id"}, 2, "thread: invalid id"},
		{[]string{"checkpoint", "conv", "--ns", "a b"}, 2, `ns "a b": invalid id`},
		{[]string{"checkpoint"}, 2, "missing THREAD"},
		{[]string{"checkpoint", "conv", "more"}, 2, `unexpected argument "more"`},
		{[]string{"thread", "nope"}, 1, "thread nope not found"},
		{[]string{"thread", "../x"}, 2, "thread: invalid id"},
		{[]string{"thread"}, 2, "missing THREAD"},
		{[]string{"checkpoint", "two"}, 2, `thread two has checkpoints in 2 namespaces ("", "left"): choose one with --ns`},
	} {
		r := b.run(t, "", tc.args...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.says, tc.args)
		require.Empty(t, r.stdout, tc.args)
	}
	// Naming one works, the root namespace too.
	for ns, want := range map[string]string{"": "2", "left": "1"} {
		r := b.run(t, "", "checkpoint", "two", "--ns", ns, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var cp fence.Checkpoint
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &cp))
		require.Equal(t, want, string(cp.Data))
	}
}

func TestThreadShowsRunsAndNamespaces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.checkpointed(t, "talk-1", "conv", "a", `{"step": 1}`, `{"step": 2}`)

	r := b.run(t, "", "thread", "conv", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var info fence.ThreadInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &info))
	require.Equal(t, fence.ThreadInfo{Thread: "conv", Active: "talk-1", ActiveStatus: "RUNNING", Queued: []string{},
		Checkpoints: map[string]int64{"a": 2}}, info)

	r = b.run(t, "", "thread", "conv")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "thread conv  active talk-1 (RUNNING)\nqueued: -\nNS   VERSION\n\"a\"  2\n", r.stdout)
}
