package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// strongToken passes the runner's entropy check.
const strongToken = "Zq8vN3xK7pL2mW9rT4yB6cD1"

// outsideIP is an address of this machine that is not loopback: a
// connection made from it is a peer from beyond loopback, as a remote
// client's would be. The test is skipped on a machine without one.
func outsideIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return nil
}

// clientFrom is an HTTP client whose connections come from ip.
func clientFrom(ip net.IP) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// startEmbedded starts a runner on its in-process Redis with env and
// returns it with its admin server's base URL.
func startEmbedded(t *testing.T, env map[string]string) (*proc, string) {
	t.Helper()
	full := map[string]string{"ADMIN_ADDR": "127.0.0.1:0", "REDIS_URL": "redis://127.0.0.1:1/0"}
	for k, v := range env {
		full[k] = v
	}
	p := start(t, full, "--embedded")
	rec := p.waitLog(t, "admin_listening")
	p.waitLog(t, "runner_ready")
	return p, "http://" + rec["addr"].(string)
}

func do(t *testing.T, c *http.Client, method, u, host string, hdr map[string]string, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header
}

// Without a token, a peer from beyond loopback that sends "Host:
// localhost" gets nothing: not the API, not the Asynq UI's API (which
// could pause a queue), not the metrics. The same request from this
// machine is served.
func TestBinaryHostLocalhostFromRemotePeer(t *testing.T) {
	t.Parallel()
	remote := clientFrom(outsideIP(t))
	_, base := startEmbedded(t, nil)
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/runs"}, {"GET", "/monitor/api/queues"}, {"POST", "/monitor/api/queues/default:pause"},
		{"GET", "/metrics"}, {"GET", "/runs"},
	} {
		code, body, _ := do(t, remote, c.method, base+c.path, "localhost", nil, "")
		assert.Equal(t, http.StatusForbidden, code, "%s %s from beyond loopback: %s", c.method, c.path, body)
	}
	code, body, _ := do(t, remote, "GET", base+"/monitor/api/queues", "localhost", nil, "")
	require.Equal(t, http.StatusForbidden, code, body)
	code, body, _ = do(t, http.DefaultClient, "GET", base+"/monitor/api/queues", "localhost", nil, "")
	require.Equal(t, http.StatusOK, code, body)
	assert.NotContains(t, body, `"paused":true`, "the remote pause did nothing")
	code, _, _ = do(t, http.DefaultClient, "GET", base+"/metrics", "", nil, "")
	assert.Equal(t, http.StatusOK, code, "metrics for this machine")
	code, _, _ = do(t, http.DefaultClient, "GET", base+"/metrics", "attacker.example", nil, "")
	assert.Equal(t, http.StatusForbidden, code, "a rebound DNS name does not read the metrics")
}

// A burst of 300 wrong tokens is throttled after a few and logged in a
// line or two, not 300 WARN lines; a client elsewhere logs in meanwhile.
func TestBinaryWrongTokenBurst(t *testing.T) {
	t.Parallel()
	p, base := startEmbedded(t, map[string]string{"API_TOKEN": strongToken})
	codes := map[int]int{}
	for i := range 300 {
		code, _, _ := do(t, http.DefaultClient, "GET", base+"/v1/runs", "", map[string]string{"Authorization": fmt.Sprintf("Bearer guess-%d", i)}, "")
		codes[code]++
	}
	assert.LessOrEqual(t, codes[http.StatusUnauthorized], 12, "%v", codes)
	assert.GreaterOrEqual(t, codes[http.StatusTooManyRequests], 280, "%v", codes)
	assert.Equal(t, 300, codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests], "%v", codes)
	assert.LessOrEqual(t, strings.Count(p.log(), `"msg":"unauthorized"`), 2, "wrong tokens are logged at a rate")

	other := clientFrom(net.IPv4(127, 0, 0, 2))
	code, body, hdr := do(t, other, "POST", base+"/login", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
		url.Values{"token": {strongToken}, "next": {"/runs"}}.Encode())
	assert.Equal(t, http.StatusSeeOther, code, body)
	assert.Equal(t, "/runs", hdr.Get("Location"))
}

// The login's next leads only to a path here: a TAB, which browsers drop,
// cannot make "/<TAB>/evil.example" into //evil.example.
func TestBinaryLoginNextStaysLocal(t *testing.T) {
	t.Parallel()
	_, base := startEmbedded(t, map[string]string{"API_TOKEN": strongToken})
	for _, next := range []string{"/\t/evil.example", "/\\evil.example", "//evil.example", "/\n/evil.example", "https://evil.example/"} {
		code, body, hdr := do(t, clientFrom(net.IPv4(127, 0, 0, 1)), "POST", base+"/login", "",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			url.Values{"token": {strongToken}, "next": {next}}.Encode())
		require.Equal(t, http.StatusSeeOther, code, body)
		assert.Equal(t, "/runs", hdr.Get("Location"), "next %q", next)
	}
}

// silentStream opens a live event stream from ip, reads its status line
// and then never reads again: a client that holds a slot and nothing
// else.
func silentStream(t *testing.T, ip net.IP, addr, run string) (int, net.Conn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "GET /v1/runs/%s/events?follow=1 HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n", run)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	line, err := bufio.NewReader(io.LimitReader(conn, 64)).ReadString('\n')
	require.NoError(t, err)
	var code int
	_, err = fmt.Sscanf(line, "HTTP/1.1 %d", &code)
	require.NoError(t, err, line)
	return code, conn
}

// 17 clients that open a live stream and never read: one address gets its
// share of the slots and no more, a client elsewhere is still served, and
// the silent streams end after EVENT_STREAM_MAX_AGE, freeing their slots.
func TestBinarySilentStreamClients(t *testing.T) {
	t.Parallel()
	_, base := startEmbedded(t, map[string]string{"EVENT_STREAM_MAX_AGE": "3s"})
	addr := strings.TrimPrefix(base, "http://")
	code, body, _ := do(t, http.DefaultClient, "POST", base+"/v1/runs", "", map[string]string{"Content-Type": "application/json"},
		`{"id":"held","nodes":[{"id":"a","kind":"noop","queue":"nobody-serves-this"}]}`)
	require.Equal(t, http.StatusCreated, code, body)

	codes := map[int]int{}
	for range 17 {
		c, _ := silentStream(t, net.IPv4(127, 0, 0, 1), addr, "held")
		codes[c]++
	}
	assert.Equal(t, map[int]int{http.StatusOK: 8, http.StatusTooManyRequests: 9}, codes)
	c, _ := silentStream(t, net.IPv4(127, 0, 0, 2), addr, "held")
	assert.Equal(t, http.StatusOK, c, "another client still gets a stream")

	deadline := time.Now().Add(20 * time.Second)
	for {
		c, conn := silentStream(t, net.IPv4(127, 0, 0, 1), addr, "held")
		conn.Close()
		if c == http.StatusOK {
			break
		}
		require.True(t, time.Now().Before(deadline), "the silent streams never ended")
		time.Sleep(200 * time.Millisecond) // polling a server we cannot be told about
	}
}

// --embedded's Redis wants a password: another user of the machine who
// finds its port cannot use it.
func TestBinaryEmbeddedRedisNeedsPassword(t *testing.T) {
	t.Parallel()
	p, _ := startEmbedded(t, nil)
	rec := p.waitLog(t, "embedded_redis")
	addr, _ := rec["addr"].(string)
	require.NotEmpty(t, addr, "%v", rec)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	anon := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer anon.Close()
	err := anon.Ping(ctx).Err()
	require.Error(t, err, "a client without the password is refused")
	assert.Contains(t, err.Error(), "NOAUTH")
	opts, err := redis.ParseURL(rec["redis_url"].(string))
	require.NoError(t, err)
	owner := redis.NewClient(opts)
	defer owner.Close()
	assert.NoError(t, owner.Ping(ctx).Err(), "the URL the runner printed works")
}

// ADMIN_ADDR=<name>.localhost binds 127.0.0.1 without asking a resolver:
// with a hosts file (as DNS could) mapping the name to this machine's
// outside address, a runner without a token still listens on loopback
// only. Runs in a mount namespace of its own (root, unshare).
func TestBinaryLocalhostNameIsNotLookedUp(t *testing.T) {
	t.Parallel()
	ip := outsideIP(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	require.NoError(t, os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+ip.String()+" rebind.localhost\n"), 0o644))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	p := &proc{cmd: exec.Command(unshare, "-m", "sh", "-c", `mount --bind "$1" /etc/hosts && exec "$2" --embedded`, "sh", hosts, binary),
		done: make(chan struct{}), added: make(chan struct{}, 1)}
	p.cmd.Env = baseEnv(map[string]string{"ADMIN_ADDR": fmt.Sprintf("rebind.localhost:%d", port), "REDIS_URL": "redis://127.0.0.1:1/0"})
	startProc(t, p)
	rec := p.waitLog(t, "admin_listening")
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", port), rec["addr"], "bound on loopback, not where the name resolves")
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), fmt.Sprint(port)), 2*time.Second)
	if err == nil {
		conn.Close()
	}
	assert.Error(t, err, "nothing answers on the outside address")
}

// A guessable API_TOKEN stops the start with a message that says so and
// how to make a good one; a generated one starts.
func TestBinaryRefusesGuessableToken(t *testing.T) {
	t.Parallel()
	closed := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0" // never reached
	code, stderr := exitOf(t, map[string]string{"API_TOKEN": "changeme-changeme", "ADMIN_ADDR": "0.0.0.0:0", "REDIS_URL": closed})
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "API_TOKEN looks guessable")
	assert.Contains(t, stderr, "openssl rand -hex 32")
	code, stderr = exitOf(t, map[string]string{"TRUSTED_PROXY": "10.0.0.1, not-an-ip", "REDIS_URL": closed})
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, `TRUSTED_PROXY "not-an-ip"`)
}
