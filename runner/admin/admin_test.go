package admin_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// testBundle is one admin server over one Redis.
type testBundle struct {
	url     string
	token   string
	rdb     redis.UniversalClient
	client  *runner.Client
	reg     *prometheus.Registry
	metrics *runner.Metrics
	real    *redistest.Server // nil on miniredis
}

type options struct {
	real    bool // a redis-server instead of miniredis
	token   string
	maxBody int64
	maxSpec int // the client's Limits.MaxSpecBytes
	// perClient is Config.FollowersPerClient; the test's clients all
	// share one address.
	perClient int
	// wrongBurst is Config.WrongTokenBurst, for tests that send many
	// wrong tokens on purpose.
	wrongBurst int
}

func setup(t *testing.T, o options) *testBundle {
	t.Helper()
	b := &testBundle{token: o.token, reg: prometheus.NewRegistry()}
	if o.real {
		b.real = redistest.Start(t)
		b.rdb = b.real.Client(t)
	} else {
		_, b.rdb = redistest.Mini(t)
	}
	b.metrics = runner.NewMetrics(b.reg)
	c, err := runner.NewClient(runner.ClientConfig{Redis: b.rdb, Limits: runner.Limits{MaxSpecBytes: o.maxSpec}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	b.client = c
	h, err := admin.New(admin.Config{Client: c, Redis: b.rdb, Gatherer: b.reg, Token: o.token,
		MaxBodyBytes: o.maxBody, Logger: testLogger(t), FollowersPerClient: o.perClient, WrongTokenBurst: o.wrongBurst})
	require.NoError(t, err)
	srv := httptest.NewServer(contract(t, h))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// testLogger writes to the test's output, shown when the test fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// request builds a request carrying the bundle's token, if any.
func (b *testBundle) request(t *testing.T, method, path, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.url+path, r)
	require.NoError(t, err)
	if body != "" {
		ct := "application/yaml"
		if t := strings.TrimSpace(body); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	return req
}

// send runs a request and returns the status and the body.
func send(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// call sends method path body with the bundle's token, expects status
// want, and decodes a JSON answer into out (if not nil).
func (b *testBundle) call(t *testing.T, method, path, body string, want int, out any) *http.Response {
	t.Helper()
	resp, raw := send(t, b.request(t, method, path, body))
	require.Equal(t, want, resp.StatusCode, "%s %s: %s", method, path, raw)
	if out != nil {
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s %s", method, path)
		require.NoError(t, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
	return resp
}

// errorBody expects an error answer and returns it decoded.
func (b *testBundle) errorBody(t *testing.T, method, path, body string, want int) admin.ErrorBody {
	t.Helper()
	var e admin.ErrorBody
	b.call(t, method, path, body, want, &e)
	require.NotEmpty(t, e.Error, "%s %s: an error answer names the error", method, path)
	return e
}
