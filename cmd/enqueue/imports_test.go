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

// Neither binary links gRPC: baton exports traces over OTLP/HTTP with its
// own exporter, and OpenTelemetry's OTLP exporters, which import gRPC,
// doubled the enqueue binary's size (17 MB to 36 MB).
func TestBinariesLinkNoGRPC(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{".", "../runner"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, dep := range strings.Fields(string(out)) {
			require.NotContains(t, dep, "google.golang.org/grpc", "%s links %s", pkg, dep)
		}
	}
}
