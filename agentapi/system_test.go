package agentapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/agentapi"
	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/internal/redistest"
)

func systemServer(t *testing.T, token string) *httptest.Server {
	_, rdb := redistest.Mini(t)
	c, err := client.New(client.Config{Redis: rdb})
	require.NoError(t, err)
	api, err := agentapi.New(agentapi.Config{Client: c, Graphs: graphIDs{"agent"}, Token: token, Logger: runsLogger(t)})
	require.NoError(t, err)
	hs := httptest.NewServer(api)
	t.Cleanup(hs.Close)
	return hs
}

func systemGet(t *testing.T, url string, header ...string) (*http.Response, map[string]any) {
	req, err := http.NewRequestWithContext(context.Background(), "GET", url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

// /ok, /info and /docs answer as the reference's do.
func TestSystemRoutes(t *testing.T) {
	t.Parallel()
	hs := systemServer(t, "")
	resp, body := systemGet(t, hs.URL+"/ok")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string]any{"ok": true}, body)
	resp, body = systemGet(t, hs.URL+"/info")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, "version")
	assert.Equal(t, true, body["flags"].(map[string]any)["assistants"])
	resp, body = systemGet(t, hs.URL+"/docs")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Contains(t, body["paths"], "/threads/{thread_id}/runs/stream")
}

// With a token, every route but /ok needs it, as a bearer token or in
// X-Api-Key (what LangGraph's SDKs send); a wrong one is refused.
func TestTokenRule(t *testing.T) {
	t.Parallel()
	hs := systemServer(t, "s3cret")
	resp, _ := systemGet(t, hs.URL+"/ok")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "/ok is open, for health checks")
	resp, _ = systemGet(t, hs.URL+"/info")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = systemGet(t, hs.URL+"/info", "X-Api-Key", "wrong")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = systemGet(t, hs.URL+"/info", "X-Api-Key", "s3cret")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = systemGet(t, hs.URL+"/info", "Authorization", "Bearer s3cret")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// Without a token, a caller that is not on this machine is refused: a
// request relayed by a proxy on this machine counts as one.
func TestNoTokenServesLoopbackOnly(t *testing.T) {
	t.Parallel()
	hs := systemServer(t, "")
	resp, _ := systemGet(t, hs.URL+"/info", "X-Forwarded-For", "203.0.113.7")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = systemGet(t, hs.URL+"/info")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
