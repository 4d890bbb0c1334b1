package agentapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/spec"
)

// repoDir is the repository's root.
func storeRepoDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// A Python graph (get_store()) and a JS graph (config.store), run by the
// real runner's graph workers, write to the store; the API reads what
// they wrote, and they read what the API put.
func TestGraphsShareTheStoreWithTheAPI(t *testing.T) {
	repo := storeRepoDir()
	python := filepath.Join(repo, "python", ".venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no Python virtualenv at %s (make -C python venv)", python)
	}
	if _, err := os.Stat(filepath.Join(repo, "js", "node_modules", "@langchain", "langgraph")); err != nil {
		t.Skip("no js/node_modules (npm ci in js)")
	}
	bin := filepath.Join(t.TempDir(), "runner")
	build := exec.Command("go", "build", "-o", bin, "./cmd/runner")
	build.Dir = repo
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ts, c := storeServer(t, rdb)
	code, body := storeCall(t, ts, "PUT", "/store/items", `{"namespace":["config"],"key":"greeting","value":{"text":"hello from the API"}}`)
	require.Equal(t, http.StatusNoContent, code, body)

	admin := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "REDIS_URL="+srv.URL(), "RUNNER_ID=store-e2e", "ADMIN_ADDR="+admin,
		"LOG_LEVEL=warn", "LANGGRAPH_CONFIG="+filepath.Join(repo, "js", "test", "fixtures", "storeproject", "langgraph.json"),
		"LANGGRAPH_PYTHON="+python, "PYTHONPATH="+filepath.Join(repo, "python"), "EXEC_ENV=PYTHONPATH",
		"LANGGRAPH_JS_WORKER="+filepath.Join(repo, "js", "src", "worker.js"))
	logs, err := os.Create(filepath.Join(t.TempDir(), "runner.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stop := time.Now()
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		t.Logf("runner stopped in %v", time.Since(stop))
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("runner log:\n%s", b)
		}
	})

	t0 := time.Now()
	defer func() { t.Logf("graphs ran and were read back in %v", time.Since(t0)) }()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for _, g := range []struct{ graph, user, fact string }{
		{"remember_py", "ada", "likes tea"},
		{"remember_js", "bob", "likes coffee"},
	} {
		var run spec.Run
		require.NoError(t, json.Unmarshal(fmt.Appendf(nil,
			`{"nodes":[{"id":"graph","kind":"graph","input":{"graph":%q,"input":{"user":%q,"fact":%q}}}]}`,
			g.graph, g.user, g.fact), &run))
		sub, err := c.Submit(ctx, &run)
		require.NoError(t, err)
		info, err := c.Wait(ctx, sub.RunID)
		require.NoError(t, err)
		t.Logf("%s done at %v", g.graph, time.Since(t0))
		require.Equal(t, "SUCCEEDED", info.Status, "%s: %+v", g.graph, info.Nodes)
		var result map[string]any
		require.NoError(t, json.Unmarshal(info.Nodes[0].Result, &result))
		require.Equal(t, "hello from the API", result["greeting"], "%s read what the API put", g.graph)
		require.Contains(t, result["known"], g.user, "%s found its own write by search", g.graph)
		require.Equal(t, g.fact, result["fact"])

		code, body := storeCall(t, ts, "GET", "/store/items?namespace=memories."+g.user+"&key=fact", "")
		require.Equal(t, http.StatusOK, code)
		var it apiItem
		require.NoError(t, json.Unmarshal([]byte(body), &it), body)
		require.Equal(t, []string{"memories", g.user}, it.Namespace)
		require.JSONEq(t, fmt.Sprintf(`{"text":%q,"lang":%q}`, g.fact, map[bool]string{true: "python", false: "js"}[g.graph == "remember_py"]), string(it.Value))
	}
	code, body = storeCall(t, ts, "POST", "/store/namespaces", `{"prefix":["memories"]}`)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"namespaces":[["memories","ada"],["memories","bob"]]}`, body)
}
