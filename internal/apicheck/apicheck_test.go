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
	t.Parallel()
	st, err := filepath.Abs(filepath.Join(".venv", "bin", "schemathesis"))
	require.NoError(t, err)
	if _, err := os.Stat(st); err != nil {
		if os.Getenv("BATON_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s is missing and BATON_REQUIRE_PYTHON is set: run make test (it installs requirements.lock)", st)
		}
		t.Skipf("%s is missing: make test installs it from requirements.lock", st)
	}
	base := startRunner(t)

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

// startRunner starts the runner binary on a redis-server of its own and
// returns its admin server's URL once it is ready.
func startRunner(t *testing.T) string {
	t.Helper()
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
	return base
}

// A TypeScript client generated from the document (openapi-typescript
// types, openapi-fetch calls; ts/package-lock.json) submits a run to a
// real runner and reads its status until it has SUCCEEDED; tsc checks the
// program against the generated types first.
func TestGeneratedTypeScriptClient(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(filepath.Join("ts", "node_modules", ".package-lock.json")); err != nil {
		if os.Getenv("BATON_REQUIRE_NODE") != "" {
			t.Fatal("internal/apicheck/ts has no node_modules and BATON_REQUIRE_NODE is set: run make test (it runs npm ci there)")
		}
		t.Skip("internal/apicheck/ts has no node_modules: make test runs npm ci there")
	}
	build := exec.CommandContext(t.Context(), "npm", "run", "--silent", "build")
	build.Dir = "ts"
	out, err := build.CombinedOutput()
	require.NoError(t, err, "generating the client and compiling against it:\n%s", out)

	base := startRunner(t)
	run := exec.CommandContext(t.Context(), "node", filepath.Join("dist", "roundtrip.js"))
	run.Dir = "ts"
	run.Env = append(os.Environ(), "BATON_API_URL="+base)
	out, err = run.CombinedOutput()
	t.Logf("roundtrip.ts:\n%s", out)
	require.NoError(t, err)
	require.Contains(t, string(out), "SUCCEEDED: a=SUCCEEDED b=SUCCEEDED")
	require.Contains(t, string(out), "bad id refused: path.id")
}
