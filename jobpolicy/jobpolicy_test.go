package jobpolicy_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/jobpolicy"
	"github.com/batonrun/baton/spec"
)

func run(t *testing.T, s string) *spec.Run {
	t.Helper()
	r, err := spec.Parse([]byte(s))
	require.NoError(t, err)
	return r
}

// Rules travel through Redis as JSON and check the same after the trip.
func TestRulesRoundTrip(t *testing.T) {
	t.Parallel()
	var r jobpolicy.Rules
	require.NoError(t, json.Unmarshal([]byte(`{"kinds":["http"],"egress_allow":"10.0.0.0/8,hooks.internal","file_dirs":["/run/s"]}`), &r))
	b, err := json.Marshal(&r)
	require.NoError(t, err)
	require.JSONEq(t, `{"kinds":["http"],"egress_allow":"10.0.0.0/8,hooks.internal","file_dirs":["/run/s"]}`, string(b))
	require.NoError(t, r.CheckURL("http://10.1.2.3/x"))
	require.NoError(t, r.CheckURL("http://hooks.internal/x"))
	require.ErrorContains(t, r.CheckURL("http://192.168.1.1/x"), "EGRESS_ALLOW")
	require.True(t, r.FileAllowed("/run/s/a/../b"))
	require.False(t, r.FileAllowed("/run/s/../etc/passwd"))
}

// A node is checked only against the runners that could claim it: those
// of its queue that serve its kind; a runner that published nothing
// refuses nothing, and keeps a kind from counting as switched off.
func TestCheckAsksTheRunnersThatCouldClaimTheNode(t *testing.T) {
	t.Parallel()
	strict := &jobpolicy.Rules{Kinds: []string{"exec", "noop"}}
	open := &jobpolicy.Rules{Kinds: []string{"exec"}, FileDirs: []string{"/run/s"}}
	spec := `{"nodes":[{"id":"a","kind":"exec","queue":"secrets","input":{"command":["x"],"env":{"K":{"$file":"/run/s/k"}}}}]}`

	require.NoError(t, jobpolicy.Check([]jobpolicy.Runner{
		{ID: "s", Kinds: []string{"exec"}, Queues: []string{"secrets"}, Rules: open},
		{ID: "d", Kinds: []string{"exec", "noop"}, Queues: []string{"default"}, Rules: strict},
	}, run(t, spec)))
	err := jobpolicy.Check([]jobpolicy.Runner{
		{ID: "s", Kinds: []string{"exec"}, Queues: []string{"secrets"}, Rules: open},
		{ID: "s2", Kinds: []string{"exec", "noop"}, Queues: []string{"secrets"}, Rules: strict},
	}, run(t, spec))
	require.ErrorContains(t, err, `nodes[0].input.env.K: $file "/run/s/k" is not under a directory the runner lets jobs read (EXEC_FILE_DIRS)`)

	off := `{"nodes":[{"id":"a","kind":"exec"}]}`
	noExec := &jobpolicy.Rules{Kinds: []string{"noop"}}
	require.ErrorContains(t, jobpolicy.Check([]jobpolicy.Runner{{ID: "d", Kinds: []string{"noop"}, Queues: []string{"default"}, Rules: noExec}},
		run(t, off)), "nodes[0].kind: exec is switched off on every live runner of queue default (KINDS)")
	require.NoError(t, jobpolicy.Check([]jobpolicy.Runner{
		{ID: "d", Kinds: []string{"noop"}, Queues: []string{"default"}, Rules: noExec},
		{ID: "go", Kinds: []string{"noop"}, Queues: []string{"default"}},
	}, run(t, off)), "a runner that published nothing may yet run it")
	require.NoError(t, jobpolicy.Check(nil, run(t, spec)), "no live runner: nothing known")
}
