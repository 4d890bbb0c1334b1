package admin_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
)

// serve runs admin.NewServer(cfg) over miniredis on a loopback port and
// returns its address.
func serve(t *testing.T, cfg admin.Config) string {
	t.Helper()
	_, rdb := redistest.Mini(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	cfg.Client, cfg.Redis, cfg.Logger = c, rdb, testLogger(t)
	srv, err := admin.NewServer(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// untilClosed reads conn until the server closes it and returns how long
// that took from start. A connection still open after giveUp fails the
// test: the server holds it without bound.
func untilClosed(t *testing.T, conn net.Conn, r io.Reader, start time.Time) time.Duration {
	t.Helper()
	const giveUp = 10 * time.Second
	require.NoError(t, conn.SetReadDeadline(start.Add(giveUp)))
	_, err := io.Copy(io.Discard, r) // nil at EOF; a reset is a close too
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "connection still open after %s", giveUp)
	return time.Since(start)
}

// A client that stalls costs the server a bounded time, whether it stalls
// in its headers, in a body it announced (before or after the token is
// checked), or between requests.
func TestSlowClientsLoseTheirConnection(t *testing.T) {
	t.Parallel()
	const (
		header = 300 * time.Millisecond
		read   = 600 * time.Millisecond
		idle   = 400 * time.Millisecond
		slack  = 1500 * time.Millisecond // scheduling under -race; far below "forever"
	)
	timeouts := admin.Config{ReadHeaderTimeout: header, ReadTimeout: read, WriteTimeout: 5 * time.Second, IdleTimeout: idle}
	open := serve(t, timeouts)
	withToken := timeouts
	withToken.Token = "s3cret"
	guarded := serve(t, withToken)

	for _, tc := range []struct {
		name, addr, send string
		timeout          time.Duration
	}{
		{"headers never finished", open, "POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n", header},
		{"one byte of a 1000-byte body, before authentication", guarded,
			"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{", read},
		{"one byte of a 1000-byte body, to the API", open,
			"POST /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{", read},
		{"one byte of a 1000-byte body, to the Asynq UI", open,
			"POST /monitor/api/queues/default:pause HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{", read},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", tc.addr)
			require.NoError(t, err)
			defer conn.Close()
			start := time.Now()
			_, err = io.WriteString(conn, tc.send)
			require.NoError(t, err)
			held := untilClosed(t, conn, conn, start)
			t.Logf("closed after %s (timeout %s)", held.Round(time.Millisecond), tc.timeout)
			require.Less(t, held, tc.timeout+slack)
		})
	}

	t.Run("idle kept-alive connection", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", open)
		require.NoError(t, err)
		defer conn.Close()
		_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.False(t, resp.Close, "the connection is kept alive for another request")

		held := untilClosed(t, conn, br, time.Now())
		t.Logf("idle connection closed after %s (timeout %s)", held.Round(time.Millisecond), idle)
		require.Less(t, held, idle+slack)
	})
}

// The server's documented defaults apply when Config leaves them zero, and
// a negative timeout is a configuration error.
func TestServerDefaults(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	srv, err := admin.NewServer(admin.Config{Client: c, Redis: rdb})
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, srv.ReadHeaderTimeout)
	require.Equal(t, 30*time.Second, srv.ReadTimeout)
	require.Equal(t, 60*time.Second, srv.WriteTimeout)
	require.Equal(t, 120*time.Second, srv.IdleTimeout)
	require.NotNil(t, srv.ErrorLog, "connection errors go to the configured logger")

	_, err = admin.NewServer(admin.Config{Client: c, Redis: rdb, ReadTimeout: -time.Second})
	require.ErrorContains(t, err, "ReadTimeout is negative")
}
