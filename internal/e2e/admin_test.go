package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestAdminEndpointsOfARunnerProcess(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.startRunner("ra", nil)
	base := "http://" + r.admin

	code, body := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code, body)

	resp, err := http.Post(base+"/v1/runs", "application/json",
		strings.NewReader(`{"id":"api1","nodes":[{"id":"a","kind":"noop","input":{"x":1}},{"id":"b","kind":"noop","deps":["a"]}]}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, 0, c.watch("api1"))

	code, body = get(t, base+"/v1/runs/api1")
	require.Equal(t, http.StatusOK, code)
	var info struct {
		Status string
		Nodes  []struct {
			ID     string
			Result json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &info))
	require.Equal(t, "SUCCEEDED", info.Status)
	require.JSONEq(t, `{"x":1}`, string(info.Nodes[0].Result))

	code, body = get(t, base+"/v1/runs/api1/events")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"committed"`)

	code, body = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "baton_commits_total 2")
	require.Contains(t, body, `baton_claims_total{outcome="claimed"} 1`)
	require.Contains(t, body, `baton_claims_total{outcome="continued"} 1`, "b ran in a's delivery")

	code, _ = get(t, base+"/v1/runs/bad%7Bid%7D")
	require.Equal(t, http.StatusBadRequest, code, "an id with braces is refused before it becomes a key")
	code, _ = get(t, base+"/v1/runs/missing")
	require.Equal(t, http.StatusNotFound, code)

	c.redis.Pause() // Redis stops answering: not ready, still healthy
	defer c.redis.Resume()
	code, _ = get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
}

// TestWebUIShowsTheQueues renders the Asynq dashboard a runner serves in
// headless Chromium and checks that it lists baton's queues.
func TestWebUIShowsTheQueues(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("BATON_REQUIRE_CHROMIUM") != "" {
			t.Fatalf("chromium not found: %v", err)
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	c := newCluster(t)
	r := c.startRunner("ra", map[string]string{"QUEUES": "default=1"})
	// A node on a queue no runner serves stays pending there.
	c.submit(`{"id":"ui","nodes":[{"id":"a","kind":"noop","queue":"payments-eu"}]}`)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-quic", "--no-first-run", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget=10000", "--dump-dom", "http://"+r.admin+"/monitor/")
	out, err := cmd.Output()
	require.NoError(t, err)
	dom := string(out)
	require.Contains(t, dom, "Queues", "the dashboard did not render")
	require.Contains(t, dom, "payments-eu", "the queue list does not show baton's queue")
}
