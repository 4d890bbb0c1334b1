package spec_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/spec"
)

// A node's limits compile to its keys with templates filled in and costs,
// in JSON and in YAML alike.
func TestLimitsCompile(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		`{"id": "r1", "thread": "chat-7", "nodes": [{"id": "a", "kind": "llm",
		  "input": {"customer": {"id": "acme"}, "n": 42},
		  "limits": ["openai", "tenant:{thread}", "run:{run}", "cust:{input.customer.id}:{input.n}", {"name": "tpm", "cost": 2000}]}]}`,
		"id: r1\nthread: chat-7\nnodes:\n- id: a\n  kind: llm\n  input: {customer: {id: acme}, n: 42}\n" +
			"  limits: [openai, \"tenant:{thread}\", \"run:{run}\", \"cust:{input.customer.id}:{input.n}\", {name: tpm, cost: 2000}]\n",
	} {
		s, err := spec.Parse([]byte(text))
		require.NoError(t, err)
		c, err := s.Compile(spec.Limits{})
		require.NoError(t, err)
		require.Equal(t, "openai=1,tenant:chat-7=1,run:r1=1,cust:acme:42=1,tpm=~2000", c.Nodes[0].Limits)
		keys, fields := c.Nodes[0].LimitKeys(0)
		require.Equal(t, []string{"openai", "tenant:chat-7", "run:r1", "cust:acme:42", "tpm"}, keys)
		require.Equal(t, "nodes[0].limits[4]", fields[4])
	}
	// A run without a thread is its own thread.
	s, err := spec.Parse([]byte(`{"id": "solo", "nodes": [{"id": "a", "kind": "x", "limits": ["t:{thread}"]}]}`))
	require.NoError(t, err)
	c, err := s.Compile(spec.Limits{})
	require.NoError(t, err)
	require.Equal(t, "t:solo=1", c.Nodes[0].Limits)
	// No limits: the digest of a spec is what it was before limits existed.
	s, err = spec.Parse([]byte(`{"id": "solo", "nodes": [{"id": "a", "kind": "x"}]}`))
	require.NoError(t, err)
	c2, err := s.Compile(spec.Limits{})
	require.NoError(t, err)
	require.NotEqual(t, c.Digest, c2.Digest)
	require.Equal(t, "", c2.Nodes[0].Limits)
}

// Bad limit entries are errors naming the field.
func TestLimitsBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, field, msg string }{
		{`{"nodes": [{"id": "a", "kind": "x", "limits": "openai"}]}`, "nodes[0].limits", "want a list"},
		{`{"nodes": [{"id": "a", "kind": "x", "limits": ["a b"]}]}`, "nodes[0].limits[0]", "allowed"},
		{`{"nodes": [{"id": "a", "kind": "x", "limits": ["{nope}"]}]}`, "nodes[0].limits[0]", "unknown template"},
		{`{"nodes": [{"id": "a", "kind": "x", "limits": ["t:{thread"]}]}`, "nodes[0].limits[0]", "unclosed"},
		{`{"nodes": [{"id": "a", "kind": "x", "limits": ["x", "x"]}]}`, "nodes[0].limits[1]", "duplicate"},
		{`{"nodes": [{"id": "a", "kind": "x", "limits": [{"name": "x", "cost": 0}]}]}`, "nodes[0].limits[0].cost", "want 1"},
		{`{"nodes": [{"id": "a", "kind": "x", "limits": [{"name": "x", "cost": -4}]}]}`, "nodes[0].limits[0].cost", "want 1"},
		{`{"nodes": [{"id": "a", "kind": "x", "limits": [{"name": "x", "costs": 4}]}]}`, "spec", "costs"},
		{`{"id": "r", "nodes": [{"id": "a", "kind": "x", "input": {"t": 1.5}, "limits": ["t:{input.t}"]}]}`, "nodes[0].limits[0]", "whole number"},
		{`{"id": "r", "nodes": [{"id": "a", "kind": "x", "input": {"t": "a b"}, "limits": ["t:{input.t}"]}]}`, "nodes[0].limits[0]", "allowed"},
		{`{"id": "r", "nodes": [{"id": "a", "kind": "x", "limits": ["t:{input.t}"]}]}`, "nodes[0].limits[0]", `the input has no "t"`},
	} {
		s, err := spec.Parse([]byte(tc.spec))
		if err == nil {
			_, err = s.Compile(spec.Limits{})
		}
		require.Error(t, err, tc.spec)
		require.ErrorIs(t, err, spec.ErrInvalid, tc.spec)
		require.Contains(t, err.Error(), tc.field+": ", tc.spec)
		require.Contains(t, err.Error(), tc.msg, tc.spec)
	}
}
