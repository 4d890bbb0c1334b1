package kinds_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// localHTTP is the http kind allowed to reach the tests' servers on
// loopback, as an operator allows an address with EGRESS_ALLOW.
func localHTTP() runner.Kind {
	return kinds.HTTPWith(kinds.HTTPOptions{Egress: loopback})
}

var loopback = func() *egress.Policy {
	p, err := egress.Parse("EGRESS_ALLOW", "127.0.0.0/8,::1")
	if err != nil {
		panic(err)
	}
	return p
}()

// seen is what a test server received.
type seen struct {
	method string
	header http.Header
	body   string
}

// serve starts a server that records each request and answers with h.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, <-chan seen) {
	t.Helper()
	reqs := make(chan seen, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reqs <- seen{r.Method, r.Header.Clone(), string(b)}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, reqs
}

func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func httpInput(t *testing.T, in map[string]any) string {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	return string(b)
}

func TestHTTPPostsTheBodyWithTheFencingHeaders(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, reply(200, `{"charged": true}`))
	in := httpInput(t, map[string]any{
		"url":  srv.URL + "/charge",
		"body": map[string]any{"amount": 5},
		"headers": map[string]string{
			"X-Trace":             "t1",
			"Baton-Fencing-Token": "r1/n1@999/forged", // cannot override
		},
	})

	out, err := kinds.HTTPWith(kinds.HTTPOptions{Client: srv.Client(), Egress: loopback}).Run(context.Background(), newTask("http", in))
	require.NoError(t, err)
	assert.JSONEq(t, `{"charged": true}`, string(out))

	r := <-reqs
	assert.Equal(t, http.MethodPost, r.method)
	assert.JSONEq(t, `{"amount": 5}`, r.body)
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	assert.Equal(t, "7", r.header.Get("Baton-Epoch"))
	assert.Equal(t, "r1/n1@7/abc", r.header.Get("Baton-Fencing-Token"))
	assert.Equal(t, "r1/n1/2", r.header.Get("Idempotency-Key"))
	assert.Equal(t, "t1", r.header.Get("X-Trace"))
}

func TestHTTPSendsNullWithoutABody(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, reply(204, ""))
	out, err := localHTTP().Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": srv.URL})))
	require.NoError(t, err)
	assert.Equal(t, "null", string(out))
	assert.Equal(t, "null", (<-reqs).body)
}

func TestHTTPNonJSONResponseBecomesAString(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, reply(201, "  created order 42\n"))
	out, err := localHTTP().Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": srv.URL})))
	require.NoError(t, err)
	assert.Equal(t, `"created order 42"`, string(out))
}

func TestHTTPClientErrorsArePermanentExceptTryLater(t *testing.T) {
	t.Parallel()
	for status, permanent := range map[int]bool{400: true, 404: true, 409: true, 408: false, 429: false} {
		srv, _ := serve(t, reply(status, "  the excerpt  "))
		_, err := localHTTP().Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": srv.URL})))
		require.Error(t, err, status)
		assert.Equal(t, permanent, runner.IsPermanent(err), "status %d: %v", status, err)
		assert.Contains(t, err.Error(), http.StatusText(status))
		assert.Contains(t, err.Error(), ": the excerpt")
	}
}

func TestHTTPServerErrorsAreRetryable(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, reply(503, "overloaded"))
	_, err := localHTTP().Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": srv.URL})))
	require.Error(t, err)
	assert.False(t, runner.IsPermanent(err))
	assert.Contains(t, err.Error(), "503")
	assert.Contains(t, err.Error(), "overloaded")
}

func TestHTTPConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	_, err = localHTTP().Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": "http://" + addr})))
	require.Error(t, err)
	assert.False(t, runner.IsPermanent(err))
	assert.Contains(t, err.Error(), "refused")
}

// hangingServer answers only when the client gives up or the test ends;
// arrived receives when a request is in.
func hangingServer(t *testing.T) (*httptest.Server, <-chan struct{}) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, arrived
}

func TestHTTPInputTimeoutIsHonouredAndRetryable(t *testing.T) {
	t.Parallel()
	srv, _ := hangingServer(t)
	start := time.Now()
	_, err := localHTTP().Run(context.Background(), newTask("http",
		httpInput(t, map[string]any{"url": srv.URL, "timeout": "200ms"})))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, runner.IsPermanent(err))
	assert.Contains(t, err.Error(), "200ms")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestHTTPCancelReturnsTheCause(t *testing.T) {
	t.Parallel()
	srv, arrived := hangingServer(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	errc := make(chan error, 1)
	go func() {
		_, err := localHTTP().Run(ctx, newTask("http", httpInput(t, map[string]any{"url": srv.URL})))
		errc <- err
	}()
	<-arrived
	cancel(runner.ErrLeaseLost)
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, runner.ErrLeaseLost)
		assert.False(t, runner.IsPermanent(err))
	case <-time.After(10 * time.Second):
		t.Fatal("http did not return after cancel")
	}
}

func TestHTTPBadHeaderIsPermanent(t *testing.T) {
	t.Parallel()
	for _, h := range []map[string]string{{"X Bad": "v"}, {"X-Ok": "a\r\nInjected: 1"}} {
		_, err := localHTTP().Run(context.Background(), newTask("http",
			httpInput(t, map[string]any{"url": "http://127.0.0.1:1", "headers": h})))
		require.Error(t, err, h)
		assert.True(t, runner.IsPermanent(err), "headers %v: %v", h, err)
		assert.Contains(t, err.Error(), `"headers"`)
	}
}

func TestHTTPBadURLIsPermanent(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{}`, `{"url":""}`, `{"url":"ftp://example.com/x"}`, `{"url":"/relative"}`, `{"url":"http://%zz"}`,
	} {
		_, err := localHTTP().Run(context.Background(), newTask("http", in))
		require.Error(t, err, in)
		assert.True(t, runner.IsPermanent(err), "input %s: %v", in, err)
		assert.Contains(t, err.Error(), `"url"`, in)
	}
}

func TestHTTPRedirectsKeepThePostOrFail(t *testing.T) {
	t.Parallel()
	target, reqs := serve(t, reply(200, `"landed"`))
	moved, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		code := 307
		if strings.HasSuffix(r.URL.Path, "/found") {
			code = 302
		}
		http.Redirect(w, r, target.URL, code)
	})

	out, err := localHTTP().Run(context.Background(), newTask("http",
		httpInput(t, map[string]any{"url": moved.URL + "/temp", "body": "x"})))
	require.NoError(t, err)
	assert.Equal(t, `"landed"`, string(out))
	r := <-reqs
	assert.Equal(t, http.MethodPost, r.method)
	assert.Equal(t, `"x"`, r.body)
	assert.Equal(t, "r1/n1@7/abc", r.header.Get("Baton-Fencing-Token"))

	// A 302 would turn the POST into a GET: refused, not followed.
	_, err = localHTTP().Run(context.Background(), newTask("http",
		httpInput(t, map[string]any{"url": moved.URL + "/found", "body": "x"})))
	require.Error(t, err)
	assert.True(t, runner.IsPermanent(err), "%v", err)
	assert.Contains(t, err.Error(), "not followed")
	assert.Empty(t, reqs, "the redirect target was called")
}

func TestHTTPKeepsTheHeadOfAHugeResponse(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, reply(200, strings.Repeat("a", 2<<20)))
	out, err := localHTTP().Run(context.Background(), newTask("http", httpInput(t, map[string]any{"url": srv.URL})))
	require.NoError(t, err)
	var s string
	require.NoError(t, json.Unmarshal(out, &s))
	assert.True(t, strings.HasPrefix(s, "aaaa"))
	assert.True(t, strings.HasSuffix(s, "[... truncated at 1 MiB]"))
	assert.Less(t, len(s), 1<<20+100)
}
