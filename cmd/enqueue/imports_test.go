package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A program that only submits links no worker runtime: the CLI stays free
// of the runner package, Prometheus and the Asynq web UI.
func TestEnqueueLinksNoWorkerRuntime(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		require.NotEqual(t, "github.com/batonrun/baton/runner", dep)
		require.False(t, strings.HasPrefix(dep, "github.com/batonrun/baton/runner/"), "enqueue links %s", dep)
		require.False(t, strings.HasPrefix(dep, "github.com/prometheus/"), "enqueue links %s", dep)
		require.False(t, strings.HasPrefix(dep, "github.com/hibiken/asynqmon"), "enqueue links %s", dep)
	}
}
