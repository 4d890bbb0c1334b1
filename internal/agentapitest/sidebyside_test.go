package agentapitest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// A client script: how to start it against a server's URL.
type script struct {
	name string
	argv func(url string) []string
}

func scripts(t *testing.T) []script {
	py, err := filepath.Abs(filepath.Join(".venv", "bin", "python"))
	require.NoError(t, err)
	return []script{
		{"py-sync", func(u string) []string {
			return []string{py, "clients/client.py", "--url", u, "--sync", "--tag", "pys"}
		}},
		{"py-async", func(u string) []string {
			return []string{py, "clients/client.py", "--url", u, "--async", "--tag", "pya"}
		}},
		{"js", func(u string) []string { return []string{"node", "clients/client.mjs", "--url", u, "--tag", "js"} }},
	}
}

// requireClients skips the test, saying what is missing, when node or the
// locked installs are absent, or fails it when BATON_REQUIRE_NODE or
// BATON_REQUIRE_PYTHON is set (CI).
func requireClients(t *testing.T) {
	t.Helper()
	need := func(env, what string, ok bool) {
		if ok {
			return
		}
		if os.Getenv(env) != "" {
			t.Fatalf("%s, and %s is set: run make test (it installs from the lockfiles)", what, env)
		}
		t.Skipf("%s: make test installs it from the lockfiles; the Agent Server API's side-by-side test did not run", what)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	_, nodeErr := exec.LookPath("node")
	need("BATON_REQUIRE_NODE", "node is not installed", nodeErr == nil)
	need("BATON_REQUIRE_NODE", "internal/agentapitest/node_modules is missing (npm ci)", exists("node_modules/.package-lock.json"))
	need("BATON_REQUIRE_NODE", "js/node_modules is missing (baton's JS graph worker; npm ci in js)", exists("../../js/node_modules/.package-lock.json"))
	need("BATON_REQUIRE_PYTHON", "internal/agentapitest/.venv is missing (requirements.lock)", exists(".venv/.installed"))
}

// The official clients see the same events, in the same order, with the
// same payloads (ids and times aside) from baton as from LangGraph's
// reference server, but for the differences listed in differences_test.go.
func TestOfficialClientsSideBySide(t *testing.T) {
	requireClients(t)
	targets := []struct{ name, url, graphs string }{{"reference", startReference(t), "js"}}
	// AGENTAPITEST_REFERENCE_ONLY=1 runs the scripts against the reference
	// alone (to work on the scripts).
	if os.Getenv("AGENTAPITEST_REFERENCE_ONLY") == "" {
		targets = append(targets,
			struct{ name, url, graphs string }{"baton", startBaton(t, "project/langgraph.json"), "js"},
			struct{ name, url, graphs string }{"baton-python", startBaton(t, "project/python/langgraph.json"), "python"})
	}
	type key struct{ target, script string }
	var (
		mu  sync.Mutex
		got = map[key]map[string]any{}
		wg  sync.WaitGroup
	)
	for _, tg := range targets {
		for _, sc := range scripts(t) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tr := runScript(t, sc, tg.url, tg.name)
				mu.Lock()
				got[key{tg.name, sc.name}] = tr
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for _, tg := range targets[1:] {
		for _, sc := range scripts(t) {
			t.Run(tg.name+"/"+sc.name, func(t *testing.T) {
				ref, ours := got[key{"reference", sc.name}], got[key{tg.name, sc.name}]
				if ref == nil || ours == nil {
					t.Fatal("a transcript is missing (the script failed: see above)")
				}
				for _, d := range compare(ref, ours) {
					if k := known(d, tg.graphs); k != nil {
						t.Logf("known difference %s: %s (%s)", d.path, d.what, k.Reason)
						continue
					}
					t.Errorf("%s: %s", d.path, d.what)
				}
			})
		}
	}
}

// runScript runs one client script against url and returns its transcript.
func runScript(t *testing.T, sc script, url, target string) map[string]any {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	argv := sc.argv(url)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s against %s: %.1fs\n%s", sc.name, target, time.Since(start).Seconds(), stderr.String())
	if err != nil {
		t.Errorf("%s against %s: %v", sc.name, target, err)
		return nil
	}
	var tr map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &tr); err != nil {
		t.Errorf("%s against %s: the transcript is not JSON: %v\n%s", sc.name, target, err, stdout.String())
		return nil
	}
	if os.Getenv("AGENTAPITEST_KEEP") != "" { // keep the transcripts to read them
		_ = os.WriteFile(filepath.Join(os.TempDir(), "agentapitest-"+target+"-"+sc.name+".json"), stdout.Bytes(), 0o644)
	}
	return tr
}

// startReference starts LangGraph's reference server (refserver.mjs) on a
// free port, in a temporary copy of the JS project (it keeps its state in
// the project's folder), and returns its URL once it answers /ok.
func startReference(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"graphs.mjs", "langgraph.json"} {
		b, err := os.ReadFile(filepath.Join("project", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	nm, err := filepath.Abs("node_modules")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(nm, filepath.Join(dir, "node_modules")))
	var cfg struct {
		Graphs map[string]any `json:"graphs"`
	}
	b, err := os.ReadFile(filepath.Join("project", "langgraph.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cfg))
	port := redistest.FreePort(t)
	opts, err := json.Marshal(map[string]any{"port": port, "host": "127.0.0.1", "cwd": dir, "graphs": cfg.Graphs, "nWorkers": 10})
	require.NoError(t, err)
	cmd := exec.Command("node", "--import", "./node_modules/@langchain/langgraph-api/dist/preload.mjs", "refserver.mjs", string(opts))
	cmd.Env = append(os.Environ(), "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false", "LOG_LEVEL=warn")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	log := &lockedBuffer{}
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("the reference server exited:\n%s", log.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the reference server did not start in 60s:\n%s", log.String())
	}
	return "http://127.0.0.1:" + strconv.Itoa(port)
}

// startBaton starts a runner serving the project's graphs and the Agent
// Server API on a redis-server of its own, and returns the API's URL once
// it answers /ok.
func startBaton(t *testing.T, config string) string {
	t.Helper()
	rs := redistest.Start(t)
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	cfg, err := filepath.Abs(config)
	require.NoError(t, err)
	py, err := filepath.Abs(filepath.Join(".venv", "bin", "python"))
	require.NoError(t, err)
	api := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, runnerBin)
	cmd.Env = append(os.Environ(),
		"REDIS_URL="+rs.URL(),
		"ADMIN_ADDR="+fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)),
		"AGENT_API_ADDR="+api,
		"LANGGRAPH_CONFIG="+cfg,
		"LANGGRAPH_PYTHON="+py,
		"LANGGRAPH_JS_WORKER="+filepath.Join(repo, "js", "src", "worker.js"),
		"PYTHONPATH="+filepath.Join(repo, "python"),
		"EXEC_ENV=PYTHONPATH",
		"CONCURRENCY=16",
		"LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	base := "http://" + api
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/ok")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond, "the runner's Agent Server API (AGENT_API_ADDR) did not answer /ok")
	return base
}

// lockedBuffer is a child's stderr, written by exec's copying goroutine
// and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
