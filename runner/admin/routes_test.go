package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner/admin"
)

// With a token, the API and the UI need it; probes and metrics do not.
func TestToken(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token-for-the-test"
	b := setup(t, options{token: token, wrongBurst: 1000}) // security_test.go: the throttle

	for _, path := range []string{"/v1/runs", "/v1/runs/x", "/v1/nothing", "/monitor/", "/monitor/api/queues"} {
		for _, auth := range []string{"", "Bearer wrong-token", "Basic " + token, "Bearer", token} {
			req := b.request(t, "GET", path, "")
			req.Header.Del("Authorization")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, raw := send(t, req)
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "GET %s with %q: %s", path, auth, raw)
			assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer", path)
			assert.Contains(t, string(raw), `"error"`, path)
		}
	}
	req := b.request(t, "POST", "/v1/runs", `{"nodes": [{"id": "a", "kind": "noop"}]}`)
	req.Header.Del("Authorization")
	resp, _ := send(t, req)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a submit without the token stores nothing")
	var list admin.ListBody
	b.call(t, "GET", "/v1/runs", "", http.StatusOK, &list)
	assert.Empty(t, list.Runs)

	// The scheme is case-insensitive, as HTTP says.
	req = b.request(t, "GET", "/v1/runs", "")
	req.Header.Set("Authorization", "bearer "+token)
	resp, _ = send(t, req)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		req := b.request(t, "GET", path, "")
		req.Header.Del("Authorization")
		resp, raw := send(t, req)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "GET %s stays open: %s", path, raw)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t, options{real: true})

	resp, raw := send(t, b.request(t, "GET", "/healthz", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok", strings.TrimSpace(string(raw)))
	resp, raw = send(t, b.request(t, "GET", "/readyz", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	assert.Equal(t, "ok", strings.TrimSpace(string(raw)))

	b.real.Stop()

	e := b.errorBody(t, "GET", "/readyz", "", http.StatusServiceUnavailable)
	assert.Contains(t, e.Error, "redis")
	resp, _ = send(t, b.request(t, "GET", "/healthz", ""))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "liveness does not depend on Redis")
	// The API says Redis is unavailable; it does not blame the caller.
	b.errorBody(t, "GET", "/v1/runs/some-run", "", http.StatusServiceUnavailable)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	resp, raw := send(t, b.request(t, "GET", "/metrics", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body := string(raw)
	for _, series := range []string{"baton_commits_total", "baton_nodes_running", "baton_heartbeat_rtt_seconds"} {
		assert.Contains(t, body, series)
	}
}

// The Asynq UI renders, and its JSON API shows the queue a submit filled.
func TestMonitor(t *testing.T) {
	t.Parallel()
	b := setup(t, options{token: "monitor-token-0123456789"})
	b.call(t, "POST", "/v1/runs", `{"nodes": [{"id": "a", "kind": "noop", "queue": "critical"}]}`, http.StatusCreated, nil)

	resp, raw := send(t, b.request(t, "GET", "/monitor/", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	assert.Contains(t, strings.ToLower(string(raw)), "<html")

	resp, raw = send(t, b.request(t, "GET", "/monitor/api/queues", ""))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	var queues struct {
		Queues []struct {
			Queue   string `json:"queue"`
			Pending int    `json:"pending"`
		} `json:"queues"`
	}
	require.NoError(t, json.Unmarshal(raw, &queues), "%s", raw)
	require.Len(t, queues.Queues, 1, "%s", raw)
	assert.Equal(t, "critical", queues.Queues[0].Queue)
	assert.Equal(t, 1, queues.Queues[0].Pending)
}

// Without a token, only loopback hosts are served, and a browser cannot be
// used to change state from another origin.
func TestWithoutTokenBrowserAttacks(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	spec := `{"nodes": [{"id": "a", "kind": "noop"}]}`

	t.Run("loopback names are served", func(t *testing.T) {
		t.Parallel()
		for _, host := range []string{"localhost", "localhost:8080", "127.0.0.1:8080", "127.1.2.3", "[::1]:8080", "app.localhost"} {
			req := b.request(t, "GET", "/v1/runs", "")
			req.Host = host
			resp, raw := send(t, req)
			assert.Equal(t, http.StatusOK, resp.StatusCode, "Host %s: %s", host, raw)
		}
	})

	t.Run("a rebound DNS name is refused", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/v1/runs", "/monitor/"} {
			req := b.request(t, "GET", path, "")
			req.Host = "attacker.example:8080"
			resp, raw := send(t, req)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", path, raw)
		}
		req := b.request(t, "GET", "/healthz", "")
		req.Host = "attacker.example:8080"
		resp, _ := send(t, req)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "probes answer any host")
	})

	t.Run("cross-origin submits are refused", func(t *testing.T) {
		t.Parallel()
		for _, h := range [][2]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "http://attacker.example"}} {
			req := b.request(t, "POST", "/v1/runs", spec)
			req.Header.Set(h[0], h[1])
			resp, raw := send(t, req)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s: %s", h[0], raw)
			assert.Contains(t, string(raw), "cross-origin")
		}
	})
}

func TestConfigRequired(t *testing.T) {
	t.Parallel()
	_, err := admin.New(admin.Config{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Client is required")
	assert.Contains(t, err.Error(), "Redis is required")
}

// A person opens the UI in a browser, which cannot send a bearer header:
// the login form sets a cookie that stands in for it.
func TestBrowserLoginToTheUI(t *testing.T) {
	t.Parallel()
	const token = "browser-token-0123456789"
	b := setup(t, options{token: token})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	req := b.request(t, "GET", "/monitor/", "")
	req.Header.Del("Authorization")
	req.Header.Set("Accept", "text/html")
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/login?next=%2Fmonitor%2F", resp.Header.Get("Location"), "back to /monitor/ after the login")

	post := func(tok string) *http.Response {
		req := b.request(t, "POST", "/login", "token="+tok)
		req.Header.Del("Authorization")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	assert.Equal(t, http.StatusUnauthorized, post("wrong").StatusCode)
	assert.Empty(t, post("wrong").Cookies())

	ok := post(token)
	assert.Equal(t, http.StatusSeeOther, ok.StatusCode)
	require.Len(t, ok.Cookies(), 1)
	c := ok.Cookies()[0]
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.NotContains(t, c.Value, token, "the cookie holds a session, not the token")

	req = b.request(t, "GET", "/monitor/api/queues", "")
	req.Header.Del("Authorization")
	req.AddCookie(c)
	resp, raw := send(t, req)
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(raw))
	assert.Contains(t, string(raw), `"queues"`)
}
