package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A limit set through the CLI is listed, replaced and deleted; what the
// list prints is what was set.
func TestLimitSetListDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "", "limit", "set", "openai", "--concurrency", "3", "--rate", "20/s", "--burst", "5")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "limit openai set: concurrency 3, rate 20/s, burst 5\n", r.stdout)
	r = b.run(t, "", "limit", "set", "tenant:*", "--concurrency", "1")
	require.Equal(t, 0, r.code, r.stderr)

	r = b.run(t, "", "limit", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got []struct {
		Name        string `json:"name"`
		Concurrency int    `json:"concurrency"`
		Rate        string `json:"rate"`
		Burst       int    `json:"burst"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.Len(t, got, 2)
	require.Equal(t, "openai", got[0].Name)
	require.Equal(t, 3, got[0].Concurrency)
	require.Equal(t, "20/s", got[0].Rate)
	require.Equal(t, 5, got[0].Burst)
	require.Equal(t, "tenant:*", got[1].Name)

	r = b.run(t, "", "limit", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "openai")
	require.Contains(t, r.stdout, "20/s")

	r = b.run(t, "", "limit", "delete", "openai")
	require.Equal(t, 0, r.code, r.stderr)
	r = b.run(t, "", "limit", "delete", "openai")
	require.Equal(t, 1, r.code, "deleting a limit that is not set is refused")
	require.Contains(t, r.stderr, "no limit openai is set")
}

// Bad limits are exit 2 with the flag named, and change nothing stored.
func TestLimitSetBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 0, b.run(t, "", "limit", "set", "k", "--concurrency", "2").code)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "0"}, "--concurrency"},
		{[]string{"--concurrency", "-1"}, "--concurrency"},
		{[]string{"--rate", "10/fortnight"}, "rate"},
		{[]string{"--rate", "0/s"}, "rate"},
		{[]string{"--rate", "5/s", "--burst", "-2"}, "--burst"},
		{[]string{"--burst", "2", "--concurrency", "1"}, "burst: needs a rate"},
		{nil, "set --concurrency N"},
	} {
		r := b.run(t, "", append([]string{"limit", "set", "k"}, c.args...)...)
		require.Equal(t, 2, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.want, "%v", c.args)
	}
	r := b.run(t, "", "limit", "set", "a{b}", "--concurrency", "1")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "name")
	r = b.run(t, "", "limit", "list")
	require.Equal(t, 0, r.code)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, "only k is set: %s", r.stdout)
	require.Contains(t, lines[1], "k  ")
	require.Contains(t, lines[1], "2")
}

// A node naming a limit that is not set, or a template that cannot be
// filled, is refused at submit naming the field, and no run is stored.
func TestSubmitRefusesUndeclaredLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, 0, b.run(t, "", "limit", "set", "openai", "--rate", "20/s").code)
	require.Equal(t, 0, b.run(t, "", "limit", "set", "tenant:*", "--concurrency", "1").code)

	r := b.run(t, `{"id": "r1", "nodes": [{"id": "a", "kind": "noop", "limits": ["openai", "opnai"]}]}`, "submit", "-")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, `nodes[0].limits[1]: no limit "opnai" is set`)
	r = b.run(t, `{"id": "r2", "nodes": [{"id": "a", "kind": "noop", "limits": ["tenant:{input.tenant}"], "input": {"x": 1}}]}`, "submit", "-")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, `nodes[0].limits[0]: {input.tenant}: the input has no "tenant"`)
	r = b.run(t, `{"id": "r3", "nodes": [{"id": "a", "kind": "noop", "limits": ["{bogus}"]}]}`, "submit", "-")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "nodes[0].limits[0]")
	require.Contains(t, r.stderr, "unknown template {bogus}")
	for _, id := range []string{"r1", "r2", "r3"} {
		r = b.run(t, "", "status", id)
		require.Equal(t, 1, r.code, "run %s was not stored", id)
	}

	// Covered by the rule, templates filled in: accepted.
	id := b.submit(t, `{"id": "r4", "thread": "acme", "nodes": [{"id": "a", "kind": "noop",
		"limits": ["tenant:{thread}", {"name": "openai", "cost": 3}]}]}`)
	require.Equal(t, "r4", id)
}
