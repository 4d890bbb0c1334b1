package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

const pair = `{"id": "%s", "nodes": [{"id": "a", "kind": "noop"}, {"id": "b", "kind": "noop", "deps": ["a"]}]}`

func TestCancelThenStatusShowsCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, diamond)

	r := b.run(t, "", "cancel", id, "--reason", "wrong branch")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "CANCELLED\n", r.stdout, "no node was running, so the run ends at once")

	s := b.status(t, id)
	require.Equal(t, "CANCELLED", s.Status)
	for _, n := range s.Nodes {
		require.Equal(t, "CANCELLED", n.State, n.ID)
		require.Contains(t, n.Error, "wrong branch")
	}

	// Cancelling again is fine.
	r = b.run(t, "", "cancel", id)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "CANCELLED\n", r.stdout)
	require.Contains(t, r.stderr, "already cancelled")
}

func TestCancelRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, fmt.Sprintf(pair, "done-1"))
	b.finish(t, "done-1")

	r := b.run(t, "", "cancel", "done-1")
	require.Equal(t, 1, r.code, "a finished run cannot be cancelled")
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "run done-1 already SUCCEEDED")
	require.Equal(t, "SUCCEEDED", b.status(t, "done-1").Status)

	r = b.run(t, "", "cancel", "no-such-run")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "run no-such-run not found")

	r = b.run(t, "", "cancel", "a{b}")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "run id: ")
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "", "status", "no-such-run", "--json")
	require.Equal(t, 1, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "run no-such-run not found")

	for _, bad := range []string{"a{b}", "a:b", "a b", "x/y", "", "é"} {
		r := b.run(t, "", "status", bad)
		require.Equal(t, 2, r.code, "%q: %s", bad, r.stderr)
		require.Contains(t, r.stderr, "run id: ", bad)
		require.Empty(t, r.stdout)
	}
	r = b.run(t, "", "status", "-x", "r")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "flag provided but not defined: -x")
	require.Contains(t, r.stderr, "usage: enqueue status")
}

func TestStatusOfFinishedRunShowsResults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, fmt.Sprintf(pair, "ok-1"))
	b.finish(t, "ok-1")
	s := b.status(t, "ok-1")
	require.Equal(t, "SUCCEEDED", s.Status)
	for _, n := range s.Nodes {
		require.Equal(t, "SUCCEEDED", n.State)
		require.Equal(t, int64(1), n.Epoch)
		require.Equal(t, "test-worker", n.Owner)
		var res map[string]bool
		require.NoError(t, json.Unmarshal(n.Result, &res))
		require.True(t, res["ok"])
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"l-1", "l-2", "l-3"} {
		b.submit(t, fmt.Sprintf(pair, id))
	}
	require.Equal(t, 0, b.run(t, "", "cancel", "l-2").code)

	list := func(args ...string) []map[string]any {
		t.Helper()
		r := b.run(t, "", append([]string{"list", "--json"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		var out []map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		return out
	}
	ids := func(runs []map[string]any) []any {
		var out []any
		for _, r := range runs {
			out = append(out, r["id"])
		}
		return out
	}
	require.ElementsMatch(t, []any{"l-1", "l-2", "l-3"}, ids(list()))
	require.Equal(t, []any{"l-2"}, ids(list("--status", "cancelled")))
	require.Len(t, list("--limit", "2"), 2)

	// --thread keeps one thread's runs; a run without a thread is the
	// thread of its own id.
	for _, id := range []string{"t-1", "t-2"} {
		b.submit(t, fmt.Sprintf(`{"id": %q, "thread": "chat-9", "multitask": "enqueue", "nodes": [{"id": "a", "kind": "noop"}]}`, id))
	}
	require.ElementsMatch(t, []any{"t-1", "t-2"}, ids(list("--thread", "chat-9")))
	require.Equal(t, []any{"l-3"}, ids(list("--thread", "l-3")))
	require.Empty(t, list("--thread", "nobody"))
	r0 := b.run(t, "", "list", "--thread", "chat-9")
	require.Equal(t, 0, r0.code, r0.stderr)
	require.Regexp(t, `(?m)^t-\d\s+\S+.*\s+chat-9$`, r0.stdout)

	r := b.run(t, "", "list")
	require.Equal(t, 0, r.code)
	require.Regexp(t, `(?m)^l-2\s+CANCELLED\s+2/2`, r.stdout)

	for _, bad := range [][]string{{"--status", "DONE"}, {"--limit", "0"}, {"--limit", "x"}, {"extra"}, {"--thread", "no spaces"}} {
		r := b.run(t, "", append([]string{"list"}, bad...)...)
		require.Equal(t, 2, r.code, "%v", bad)
	}
	r = b.run(t, "", "list", "--thread", "bad/id")
	require.Contains(t, r.stderr, "--thread")
}
