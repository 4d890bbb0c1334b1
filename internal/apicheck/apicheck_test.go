package apicheck_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/bintest"
	"github.com/batonrun/baton/internal/redistest"
)

var runnerBin string

func TestMain(m *testing.M) {
	bintest.Main(m, func(dir string) { runnerBin = filepath.Join(dir, "runner") }, "github.com/batonrun/baton/cmd/runner")
}

// schemathesis finds no 5xx and no answer outside the document, in a fixed
// budget of generated requests against a real runner on a real Redis.
func TestSchemathesis(t *testing.T) {
	st, err := filepath.Abs(filepath.Join(".venv", "bin", "schemathesis"))
	require.NoError(t, err)
	if _, err := os.Stat(st); err != nil {
		if os.Getenv("BATON_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s is missing and BATON_REQUIRE_PYTHON is set: run make test (it installs requirements.lock)", st)
		}
		t.Skipf("%s is missing: make test installs it from requirements.lock", st)
	}
	rs := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, runnerBin)
	cmd.Env = append(os.Environ(), "REDIS_URL="+rs.URL(), "ADMIN_ADDR="+addr, "LOG_LEVEL=warn", "BATON_PREFIX=apicheck")
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })

	base := "http://" + addr
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 15*time.Second, 20*time.Millisecond, "the runner's admin server did not become ready")

	// A run to read, so the reads also answer 200 and not only 404.
	resp, err := http.Post(base+"/v1/runs", "application/json",
		stringsReader(`{"id": "st-1", "thread": "st", "nodes": [{"id": "a", "kind": "noop"}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	examples := 25 // the budget: generated requests per operation and phase
	if testing.Short() {
		examples = 5
	}
	run := exec.CommandContext(t.Context(), st, "run", base+"/v1/openapi.json",
		"--url", base,
		"--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
		"--max-examples", strconv.Itoa(examples),
		"--generation-deterministic",
		"--suppress-health-check", "all",
		"--no-color")
	run.Env = append(os.Environ(), "SCHEMATHESIS_HOOKS=", "PYTHONUNBUFFERED=1")
	out, err := run.CombinedOutput()
	t.Logf("schemathesis:\n%s", out)
	require.NoError(t, err, "schemathesis found answers that are 5xx or break the document (above)")
}
