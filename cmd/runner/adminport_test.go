package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// Three runners started on one host with the defaults all run: the first
// takes the default admin port (or the next free one, if something else
// holds it), the others the next free ports, each logging a URL that
// answers.
func TestThreeRunnersWithDefaultAdminAddrAllRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ports := map[string]bool{}
	var procs []*proc
	for i := range 3 {
		p := start(t, map[string]string{"REDIS_URL": srv.URL(), "RUNNER_ID": fmt.Sprintf("same-host-%d", i)})
		rec := p.waitLog(t, "admin_listening")
		url, _ := rec["url"].(string)
		require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), "a URL to open: %v", rec)
		resp, err := http.Get(url + "healthz")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, "ok\n", string(body), "runner %d answers at the URL it logged", i)
		assert.False(t, ports[url], "runner %d logged a URL another runner holds: %s", i, url)
		ports[url] = true
		p.waitLog(t, "runner_ready")
		procs = append(procs, p)
		if i > 0 {
			assert.Contains(t, p.log(), `"msg":"admin_port_taken"`, "runner %d says why its port is not the default", i)
		}
	}
	for i, p := range procs {
		assert.Equal(t, exitOK, p.exitAfter(t, syscall.SIGTERM), "runner %d", i)
	}
}

// An ADMIN_ADDR the user chose that is taken fails the start, naming the
// setting: a runner must not answer somewhere the user did not ask for.
func TestExplicitAdminAddrTakenFails(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	code, stderr := exitOf(t, map[string]string{"REDIS_URL": srv.URL(), "ADMIN_ADDR": ln.Addr().String()})
	assert.Equal(t, exitFailed, code, stderr)
	assert.Contains(t, stderr, "ADMIN_ADDR "+ln.Addr().String()+" is in use")
}

// The logged URL is one a person can open, not http://[::]:8080/.
func TestListenURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8081}, "http://127.0.0.1:8081"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8082}, "http://127.0.0.1:8082"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8083}, "http://[::1]:8083"},
	} {
		assert.Equal(t, c.want, listenURL(c.addr))
	}
}
