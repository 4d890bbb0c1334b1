package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/egress"
)

func TestPrivateRanges(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "127.9.9.9", "::1", "169.254.169.254", "10.1.2.3", "172.16.0.1",
		"192.168.1.1", "fd00::1", "fe80::1", "0.0.0.0", "::", "::ffff:127.0.0.1", "100.100.100.200", "255.255.255.255",
		"64:ff9b::7f00:1", "224.0.0.1"} {
		require.True(t, egress.Private(netip.MustParseAddr(a)), a)
		require.False(t, (*egress.Policy)(nil).AllowsAddr(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"93.184.215.14", "8.8.8.8", "2606:4700::1111"} {
		require.False(t, egress.Private(netip.MustParseAddr(a)), a)
	}
}

func TestParseRefusesWhatIsNotACIDROrHost(t *testing.T) {
	t.Parallel()
	p, err := egress.Parse("EGRESS_ALLOW", "127.0.0.1/32, 10.0.0.0/8 ::1 hooks.internal,*.svc.local")
	require.NoError(t, err)
	require.True(t, p.AllowsAddr(netip.MustParseAddr("10.9.9.9")))
	require.True(t, p.AllowsAddr(netip.MustParseAddr("::1")))
	require.False(t, p.AllowsAddr(netip.MustParseAddr("192.168.0.1")))
	require.True(t, p.AllowsHost("HOOKS.internal"))
	require.True(t, p.AllowsHost("a.b.svc.local"))
	require.False(t, p.AllowsHost("svc.local.evil"))
	for _, bad := range []string{"10.0.0.0/33", "http://x", "host:80", "1.2.3", "*", "a*b.example"} {
		_, err := egress.Parse("EGRESS_ALLOW", bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "EGRESS_ALLOW", bad)
	}
}

func TestCheckURLRefusesLiteralPrivateHosts(t *testing.T) {
	t.Parallel()
	var p *egress.Policy
	for _, u := range []string{"http://127.0.0.1:8080/monitor", "http://[::1]/", "http://169.254.169.254/latest",
		"http://localhost:9/", "http://app.localhost/", "https://10.0.0.1/"} {
		require.ErrorIs(t, p.CheckURL(u), egress.ErrRefused, u)
	}
	require.NoError(t, p.CheckURL("https://hooks.example.com/x"))
	allow, err := egress.Parse("EGRESS_ALLOW", "127.0.0.1/32")
	require.NoError(t, err)
	require.NoError(t, allow.CheckURL("http://127.0.0.1:8080/"))
	require.NoError(t, allow.CheckURL("http://localhost:8080/"))
}

// The dialer refuses a name that resolves to loopback, which a check of
// the URL's text cannot see; the allow-list lets it through.
func TestDialerRefusesWhatANameResolvesTo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	url := "http://localhost:" + port + "/"

	c := &http.Client{Transport: (*egress.Policy)(nil).Transport()}
	_, err := c.Get(url)
	require.ErrorIs(t, err, egress.ErrRefused)

	for _, allow := range []string{"127.0.0.0/8,::1", "localhost"} {
		p, err := egress.Parse("EGRESS_ALLOW", allow)
		require.NoError(t, err)
		resp, err := (&http.Client{Transport: p.Transport()}).Get(url)
		require.NoError(t, err, allow)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, "ok", string(b))
	}
	_, err = (*egress.Policy)(nil).DialContext(context.Background(), "tcp", "169.254.169.254:80")
	require.True(t, errors.Is(err, egress.ErrRefused), "%v", err)
}
