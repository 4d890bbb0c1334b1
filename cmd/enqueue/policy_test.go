package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// enqueue submit, run from a machine that shares nothing of the runners'
// environment (no EXEC_FILE_DIRS, no EGRESS_ALLOW here), refuses what the
// live runner would refuse when the nodes run, as the runner's API does:
// exit 2, one problem a line naming the field and the setting, nothing
// stored. The policy is the one the runner published to Redis.
func TestSubmitRefusesWhatTheLiveRunnersRefuse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A runner as KINDS=http,sleep,noop EXEC_ENV_REFS=OK_* sets it up.
	stock := kinds.Stock{Exec: kinds.ExecOptions{EnvRefs: []string{"OK_*"}}}
	names := []string{"http", "sleep", "noop"}
	w, err := runner.NewWorker(runner.WorkerConfig{Redis: b.srv.Client(t), ID: "policy-runner", Jobs: stock.Rules(names)})
	require.NoError(t, err)
	kinds.RegisterStockOnly(w, stock, names)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Shutdown)

	r := b.run(t, `{"id": "refused", "notify": {"url": "http://169.254.169.254/"}, "nodes": [
		{"id": "call", "kind": "http", "input": {"url": "http://127.0.0.1:8080/monitor/api/queues/default:pause"}},
		{"id": "cmd", "kind": "exec", "input": {"command": ["true"], "env": {"A": {"$file": "/etc/shadow"}}}}]}`, "submit", "-")
	require.Equal(t, 2, r.code, "stdout %q stderr %q", r.stdout, r.stderr)
	require.Empty(t, r.stdout)
	for _, want := range []string{
		"enqueue: stdin: nodes[0].input.url: egress: address refused: 127.0.0.1",
		"enqueue: stdin: nodes[1].kind: exec is switched off on every live runner of queue default (KINDS)",
		"enqueue: stdin: notify.url: egress: address refused: 169.254.169.254",
	} {
		require.Contains(t, r.stderr, want)
	}
	require.Equal(t, 3, strings.Count(r.stderr, "\n"), "one problem a line: %s", r.stderr)
	r = b.run(t, "", "list", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout, "nothing stored")

	// What the runner allows is submitted.
	require.Equal(t, "allowed", b.submit(t, `{"id": "allowed", "nodes": [{"id": "call", "kind": "http",
		"input": {"url": "https://hooks.example.com/x"}}]}`))
}
