package admin_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// logBuffer is a logger whose records a test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), "msg="+msg+" ")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newHandler is admin.New over miniredis with cfg's settings; its log is
// returned to read.
func newHandler(t *testing.T, cfg admin.Config) (http.Handler, *runner.Client, *logBuffer) {
	t.Helper()
	_, rdb := redistest.Mini(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	logs := &logBuffer{}
	cfg.Client, cfg.Redis = c, rdb
	cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs, t.Output()), nil))
	h, err := admin.New(cfg)
	require.NoError(t, err)
	return h, c, logs
}

// serveAs runs one request through h as if it came from remote.
func serveAs(h http.Handler, method, target, remote, host string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.RemoteAddr, req.Host = remote, host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Without a token, the caller decides, not its Host header: a remote peer
// that sends "Host: localhost" is refused, and so is a request a proxy on
// this machine relayed; a loopback peer addressing a loopback host, or a
// Unix socket's, is served.
func TestLoopbackRuleChecksThePeer(t *testing.T) {
	t.Parallel()
	h, _, _ := newHandler(t, admin.Config{})
	for _, path := range []string{"/v1/runs", "/monitor/api/queues", "/runs", "/metrics"} {
		for _, c := range []struct {
			remote, host string
			hdr          map[string]string
			want         int
		}{
			{"192.0.2.7:41000", "localhost", nil, http.StatusForbidden},
			{"[2001:db8::7]:41000", "127.0.0.1:8080", nil, http.StatusForbidden},
			{"127.0.0.1:41000", "localhost:8080", map[string]string{"X-Forwarded-For": "192.0.2.7"}, http.StatusForbidden},
			{"127.0.0.1:41000", "localhost:8080", map[string]string{"Forwarded": "for=192.0.2.7"}, http.StatusForbidden},
			{"127.0.0.1:41000", "attacker.example", nil, http.StatusForbidden},
			{"127.0.0.1:41000", "localhost:8080", nil, http.StatusOK},
			{"[::1]:41000", "[::1]:8080", nil, http.StatusOK},
			{"@", "localhost", nil, http.StatusOK},
		} {
			rec := serveAs(h, "GET", path, c.remote, c.host, c.hdr)
			assert.Equal(t, c.want, rec.Code, "GET %s from %s, Host %s, %v: %s", path, c.remote, c.host, c.hdr, rec.Body)
		}
	}
	rec := serveAs(h, "GET", "/healthz", "192.0.2.7:41000", "localhost", nil)
	assert.Equal(t, http.StatusOK, rec.Code, "liveness stays open to probes")

	_, err := admin.New(admin.Config{Client: &runner.Client{}, Redis: nil, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TrustedProxies needs a Token")
}

// Every answer, the Asynq UI's included, forbids framing and form posts
// to another origin; baton's own pages also allow HTML only through their
// script's policy.
func TestEveryPageForbidsFramingAndForeignForms(t *testing.T) {
	t.Parallel()
	h, _, _ := newHandler(t, admin.Config{})
	tok, _, _ := newHandler(t, admin.Config{Token: "Zq8vN3xK7pL2mW9rT4yB6cD1"})
	for _, c := range []struct {
		h    http.Handler
		path string
		page bool
	}{{h, "/runs", true}, {h, "/workers", true}, {h, "/monitor/", false}, {h, "/monitor/queues/default", false},
		{h, "/v1/runs", false}, {tok, "/login", true}, {h, "/runs/nope", true}} {
		rec := serveAs(c.h, "GET", c.path, "127.0.0.1:5000", "localhost", map[string]string{"Accept": "text/html"})
		csp := rec.Header().Get("Content-Security-Policy")
		assert.Contains(t, csp, "frame-ancestors 'none'", c.path)
		assert.Contains(t, csp, "form-action 'self'", c.path)
		assert.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"), c.path)
		if c.page {
			assert.Contains(t, csp, "require-trusted-types-for 'script'", c.path)
		}
	}
}

// A burst of wrong tokens from one client is refused with 429 past its
// budget, before its token is read, and logged in a few lines, not one
// each; another client is not affected.
func TestWrongTokenBurst(t *testing.T) {
	t.Parallel()
	const token = "Zq8vN3xK7pL2mW9rT4yB6cD1"
	h, _, logs := newHandler(t, admin.Config{Token: token, WrongTokenBurst: 5, WrongTokenEvery: time.Hour})
	codes := map[int]int{}
	for range 300 {
		rec := serveAs(h, "GET", "/v1/runs", "192.0.2.7:1000", "runner.example", map[string]string{"Authorization": "Bearer wrong-token-guess"})
		codes[rec.Code]++
	}
	assert.Equal(t, map[int]int{http.StatusUnauthorized: 5, http.StatusTooManyRequests: 295}, codes)
	assert.Equal(t, 1, logs.count("unauthorized"), "one line for the burst:\n%s", logs)
	rec := serveAs(h, "GET", "/v1/runs", "192.0.2.7:1000", "runner.example", map[string]string{"Authorization": "Bearer " + token})
	assert.Equal(t, http.StatusTooManyRequests, rec.Code, "a throttled client waits, whatever it sends")
	assert.NotEmpty(t, rec.Header().Get("Retry-After"))
	rec = serveAs(h, "GET", "/v1/runs", "192.0.2.8:1000", "runner.example", map[string]string{"Authorization": "Bearer " + token})
	assert.Equal(t, http.StatusOK, rec.Code, "another client is served")
}

// /readyz says Redis is unreachable to anyone, and why only to a caller
// the API admits.
func TestReadyzHidesRedisErrors(t *testing.T) {
	t.Parallel()
	const token = "Zq8vN3xK7pL2mW9rT4yB6cD1"
	m, rdb := redistest.Mini(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	h, err := admin.New(admin.Config{Client: c, Redis: rdb, Token: token, Logger: testLogger(t), ReadyTimeout: time.Second})
	require.NoError(t, err)
	addr := m.Addr()
	m.Close()
	rec := serveAs(h, "GET", "/readyz", "192.0.2.7:1000", "runner.example", nil)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.NotContains(t, rec.Body.String(), addr)
	assert.NotContains(t, rec.Body.String(), "dial")
	rec = serveAs(h, "GET", "/readyz", "192.0.2.7:1000", "runner.example", map[string]string{"Authorization": "Bearer " + token})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "redis: ", "the operator sees why")
}

// The Asynq UI in read-only mode refuses every change; in read-write mode
// a change is logged with who made it.
func TestMonitorReadOnlyAndAudit(t *testing.T) {
	t.Parallel()
	const token = "Zq8vN3xK7pL2mW9rT4yB6cD1"
	auth := map[string]string{"Authorization": "Bearer " + token, "Sec-Fetch-Site": "same-origin"}
	for _, readOnly := range []bool{true, false} {
		m, rdb := redistest.Mini(t)
		c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
		require.NoError(t, err)
		logs := &logBuffer{}
		h, err := admin.New(admin.Config{Client: c, Redis: rdb, Token: token, MonitorReadOnly: readOnly,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, err)
		ac := asynq.NewClient(asynq.RedisClientOpt{Addr: m.Addr()})
		_, err = ac.Enqueue(asynq.NewTask("t", nil), asynq.Queue("payments"))
		require.NoError(t, err)
		require.NoError(t, ac.Close())

		rec := serveAs(h, "POST", "/monitor/api/queues/payments:pause", "192.0.2.7:1000", "runner.example", auth)
		insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: m.Addr()})
		info, err := insp.GetQueueInfo("payments")
		require.NoError(t, err)
		_ = insp.Close()
		if readOnly {
			assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, rec.Body.String())
			assert.Contains(t, rec.Body.String(), "MONITOR_READ_ONLY")
			assert.False(t, info.Paused, "the queue still runs")
			assert.Equal(t, 1, logs.count("monitor_action_refused"), logs.String())
			continue
		}
		assert.Less(t, rec.Code, 300, rec.Body.String())
		assert.True(t, info.Paused)
		assert.Contains(t, logs.String(), `msg=monitor_action component=admin method=POST path=/monitor/api/queues/payments:pause client=192.0.2.7 credential=token status=`)
	}
}

// The session cookie is Secure when a trusted proxy says the browser used
// https, and only then.
func TestSecureCookieBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	const token = "Zq8vN3xK7pL2mW9rT4yB6cD1"
	h, _, _ := newHandler(t, admin.Config{Token: token, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}})
	login := func(remote string) *http.Cookie {
		req := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.RemoteAddr, req.Host = remote, "runner.example"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", "https")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
		cs := rec.Result().Cookies()
		require.Len(t, cs, 1)
		return cs[0]
	}
	assert.True(t, login("10.0.0.5:3000").Secure, "from the proxy")
	assert.False(t, login("192.0.2.7:3000").Secure, "a client cannot claim https itself")
}

// One client holds at most FollowersPerClient streams, and a stream ends
// after FollowMaxAge without "end": the client resumes with Last-Event-ID
// and misses nothing.
func TestFollowPerClientAndMaxAge(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	h, err := admin.New(admin.Config{Client: c, Redis: rdb, Logger: testLogger(t), FollowersPerClient: 2, FollowMaxAge: 300 * time.Millisecond})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	spec, err := runner.ParseSpec([]byte(`{"id":"f1","nodes":[{"id":"a","kind":"noop"}]}`))
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), spec)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var held []*sseStream
	var last string
	for range 2 {
		s := openStream(t, ctx, srv.URL+"/v1/runs/f1/events?follow=1", "")
		m, ok := s.next()
		require.True(t, ok)
		last = m.id
		held = append(held, s)
	}
	resp, err := http.Get(srv.URL + "/v1/runs/f1/events?follow=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "too many event streams from 127.0.0.1")

	// Each held stream ends on its own, with no "end": the run goes on.
	for _, s := range held {
		for {
			m, ok := s.next()
			if !ok {
				break
			}
			assert.NotEqual(t, "end", m.event)
			if m.id != "" {
				last = m.id
			}
		}
	}
	require.NotEmpty(t, last)
	_, err = c.Cancel(t.Context(), "f1", "done")
	require.NoError(t, err)
	s := openStream(t, t.Context(), srv.URL+"/v1/runs/f1/events?follow=1", last)
	for {
		m, ok := s.next()
		require.True(t, ok, "the resumed stream ends with end")
		assert.NotContains(t, m.data, `"submitted"`, "nothing before Last-Event-ID again")
		if m.event == "end" {
			break
		}
	}
}

// TokenBits tells generated tokens from guessable ones of the same length.
func TestTokenBits(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"3f9c2e81b7d4a60e", "Zq8vN3xK7pL2mW9rT4yB6cD1", "b1946ac92492d2347c6235b4d2611184"} {
		assert.NoError(t, admin.CheckToken(tok), tok)
	}
	for _, tok := range []string{"aaaaaaaaaaaaaaaaaaaa", "0123456789abcdef-token", "changeme-changeme", "passwordpassword",
		"abcdefghijklmnopqrstuvwxyz", "1111222233334444"} {
		err := admin.CheckToken(tok)
		if assert.Error(t, err, tok) {
			assert.Contains(t, err.Error(), "openssl rand")
		}
	}
}

// Run streams hold a client to the same share and lifetime as event
// streams: a client's third stream is refused with 429, another client
// is still served, and a held stream ends on its own at its lifetime
// without "end" (the run goes on), for the client to reconnect.
func TestRunStreamPerClientAndMaxAge(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	h, err := admin.New(admin.Config{Client: c, Redis: rdb, Logger: testLogger(t), FollowersPerClient: 2, FollowMaxAge: 300 * time.Millisecond})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	spec, err := runner.ParseSpec([]byte(`{"id":"s1","nodes":[{"id":"a","kind":"noop"}]}`))
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), spec)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	held := []*sseStream{openStream(t, ctx, srv.URL+"/v1/runs/s1/stream", ""), openStream(t, ctx, srv.URL+"/v1/runs/s1/stream", "")}
	resp, err := http.Get(srv.URL + "/v1/runs/s1/stream")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), "too many run streams from 127.0.0.1")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))

	for _, s := range held {
		for {
			m, ok := s.next()
			if !ok {
				break
			}
			assert.NotEqual(t, "end", m.event, "the run goes on: the stream ended at its lifetime")
		}
	}
	// Their slots are free again.
	s := openStream(t, ctx, srv.URL+"/v1/runs/s1/stream", "")
	s.resp.Body.Close()
}
