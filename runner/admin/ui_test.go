package admin_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
	"github.com/batonrun/baton/runner/kinds"
)

// viewBundle is an admin server over miniredis, whose clock the test
// moves to let leases expire.
type viewBundle struct {
	m      *miniredis.Miniredis
	rdb    redis.UniversalClient
	client *runner.Client
	url    string
	clock  time.Time
}

func setupView(t *testing.T, token string) *viewBundle {
	t.Helper()
	b := &viewBundle{clock: time.Now()}
	b.m, b.rdb = redistest.Mini(t)
	b.m.SetTime(b.clock)
	c, err := runner.NewClient(runner.ClientConfig{Redis: b.rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	b.client = c
	h, err := admin.New(admin.Config{Client: c, Redis: b.rdb, Token: token, Logger: testLogger(t)})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

func (b *viewBundle) advance(d time.Duration) {
	b.clock = b.clock.Add(d)
	b.m.SetTime(b.clock)
}

// page GETs path as a browser would and returns the status and the body.
func (b *viewBundle) page(t *testing.T, c *http.Client, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", b.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/html")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

// takeoverRun submits prep -> pay -> notify, lets w1's lease on pay expire,
// has w2 take it over, and has w1's late commit refused.
func (b *viewBundle) takeoverRun(t *testing.T, id string) {
	t.Helper()
	ctx := t.Context()
	spec, err := runner.ParseSpec([]byte(`{"id":"` + id + `","nodes":[
		{"id":"prep","kind":"noop","input":{"amount":42}},
		{"id":"pay","kind":"http","deps":["prep"],"input":{"url":"http://pay.invalid/charge"}},
		{"id":"audit","kind":"noop","deps":["prep"]},
		{"id":"notify","kind":"noop","deps":["pay","audit"]}]}`))
	require.NoError(t, err)
	_, err = b.client.Submit(ctx, spec)
	require.NoError(t, err)
	s := b.client.Store()
	ref := func(n string) fence.NodeRef { return fence.NodeRef{Thread: id, Run: id, Node: n} }
	prep, err := s.Claim(ctx, ref("prep"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = s.Commit(ctx, prep.Lease, []byte(`{"amount":42}`), prep.Dependents)
	require.NoError(t, err)
	old, err := s.Claim(ctx, ref("pay"), "w1", time.Second, 0)
	require.NoError(t, err)
	b.advance(2 * time.Second) // w1 is paused past its lease
	cur, err := s.Claim(ctx, ref("pay"), "w2", time.Minute, 0)
	require.NoError(t, err)
	require.Equal(t, old.Epoch+1, cur.Epoch)
	_, err = s.Commit(ctx, old.Lease, []byte(`"late"`), old.Dependents)
	require.ErrorIs(t, err, fence.ErrStaleEpoch)
}

var nodeTag = regexp.MustCompile(`<g class="node [^"]*" data-node="([^"]+)" data-state="([A-Z]+)" data-epoch="(\d+)"`)

// The run view draws every node with its state and epoch, marks the
// takeover and the refused stale write in the timeline, and shows a node's
// input and attempts on demand.
func TestRunViewShowsTakeoverAndRefusedWrite(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	b.takeoverRun(t, "pay-1")

	code, body := b.page(t, http.DefaultClient, "/runs/pay-1")
	require.Equal(t, http.StatusOK, code, body)
	got := map[string]string{}
	for _, m := range nodeTag.FindAllStringSubmatch(body, -1) {
		got[m[1]] = m[2] + "@" + m[3]
	}
	assert.Equal(t, map[string]string{"prep": "SUCCEEDED@1", "pay": "RUNNING@2", "audit": "READY@0", "notify": "BLOCKED@0"}, got)
	assert.Contains(t, body, `data-owner="w2"`)
	assert.Regexp(t, `class="ev ev-takeover mark" data-type="takeover" data-node="pay" data-epoch="2"`, body)
	assert.Regexp(t, `class="ev ev-stale_rejected mark" data-type="stale_rejected" data-node="pay" data-epoch="1"`, body)
	assert.Regexp(t, `class="ev ev-heartbeat_lost mark"`, body)
	assert.Regexp(t, `lease_until=\d\d:\d\d:\d\d\.\d{3} overdue_ms=\d+\.\d{3}s`, body, "times and durations read as such")
	assert.Contains(t, body, `1 takeover</span>`)
	assert.Contains(t, body, `1 stale write refused`)
	assert.Contains(t, body, `id="cancel"`, "an active run can be cancelled")
	assert.Contains(t, body, `data-active="true"`, "an active run's page polls")

	code, frag := b.page(t, http.DefaultClient, "/runs/pay-1/live")
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, frag, "<html", "the live part is a fragment")
	assert.Contains(t, frag, `data-node="pay" data-state="RUNNING" data-epoch="2"`)

	code, node := b.page(t, http.DefaultClient, "/runs/pay-1/nodes/pay")
	require.Equal(t, http.StatusOK, code, node)
	assert.Contains(t, node, "http://pay.invalid/charge", "the input")
	assert.Regexp(t, `(?s)<td>1</td><td>e1</td><td>w1</td><td>claimed</td>.*heartbeat_lost, stale_rejected`, node)
	assert.Regexp(t, `(?s)<td>2</td><td>e2</td><td>w2</td><td>takeover</td>.*running`, node)
	code, node = b.page(t, http.DefaultClient, "/runs/pay-1/nodes/prep")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, node, `id="node-result"`)

	code, _ = b.page(t, http.DefaultClient, "/runs/nope")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = b.page(t, http.DefaultClient, "/runs/pay-1/nodes/nope")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = b.page(t, http.DefaultClient, "/runs/bad%7Bid%7D")
	assert.Equal(t, http.StatusBadRequest, code)
}

// GET / and /runs list runs newest first with status, progress, thread
// and age; they filter by status and thread and page.
func TestRunList(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	ctx := t.Context()
	for i, s := range []string{
		`{"id":"r1","nodes":[{"id":"a","kind":"noop"}]}`,
		`{"id":"r2","thread":"chat-7","nodes":[{"id":"a","kind":"noop"},{"id":"b","kind":"noop"}]}`,
		`{"id":"r3","nodes":[{"id":"a","kind":"noop"}]}`,
	} {
		spec, err := runner.ParseSpec([]byte(s))
		require.NoError(t, err)
		_, err = b.client.Submit(ctx, spec)
		require.NoError(t, err, i) // same-millisecond submits list in reverse id order too
	}
	_, err := b.client.Cancel(ctx, "r1", "test")
	require.NoError(t, err)

	rows := regexp.MustCompile(`<tr data-run="([^"]+)" data-status="([A-Z]+)">`)
	list := func(path string) []string {
		code, body := b.page(t, http.DefaultClient, path)
		require.Equal(t, http.StatusOK, code, body)
		var out []string
		for _, m := range rows.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1]+":"+m[2])
		}
		return out
	}
	assert.Equal(t, []string{"r3:RUNNING", "r2:RUNNING", "r1:CANCELLED"}, list("/"))
	assert.Equal(t, list("/"), list("/runs"))
	assert.Equal(t, []string{"r1:CANCELLED"}, list("/runs?status=cancelled"))
	assert.Equal(t, []string{"r2:RUNNING"}, list("/runs?thread=chat-7"))
	assert.Equal(t, []string{"r2:RUNNING", "r1:CANCELLED"}, list("/runs?from=1"))
	_, body := b.page(t, http.DefaultClient, "/runs?thread=chat-7")
	assert.Contains(t, body, `<progress max="100" value="0" class="s-running"></progress> 0/2 ended`)
	code, _ := b.page(t, http.DefaultClient, "/runs?thread=%7Bx%7D")
	assert.Equal(t, http.StatusBadRequest, code)
}

// The cancel button posts like the API: same-origin posts cancel the run;
// a cross-site one is refused.
func TestCancelFromTheRunView(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	spec, err := runner.ParseSpec([]byte(`{"id":"c1","nodes":[{"id":"a","kind":"noop"}]}`))
	require.NoError(t, err)
	_, err = b.client.Submit(t.Context(), spec)
	require.NoError(t, err)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(site string) *http.Response {
		req, err := http.NewRequest("POST", b.url+"/runs/c1/cancel", strings.NewReader("reason=enough"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", site)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	assert.Equal(t, http.StatusForbidden, post("cross-site").StatusCode)
	st, err := b.client.Status(t.Context(), "c1")
	require.NoError(t, err)
	require.Equal(t, "RUNNING", st.Status, "a cross-site post changed nothing")

	resp := post("same-origin")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/runs/c1", resp.Header.Get("Location"))
	st, err = b.client.Status(t.Context(), "c1")
	require.NoError(t, err)
	assert.Equal(t, "CANCELLED", st.Status)
	assert.Equal(t, "enough", st.CancelReason)
	_, body := b.page(t, http.DefaultClient, "/runs/c1")
	assert.NotContains(t, body, `id="cancel"`, "a finished run has no cancel button")
}

// With a token, a browser is sent to a styled login form, a wrong token
// shows the form again with a message, and the right one leads back to the
// page it asked for with a session that any runner sharing the token
// accepts and that a rotated token revokes.
func TestLoginSession(t *testing.T) {
	t.Parallel()
	const token = "s3cret-token-for-the-ui"
	b := setupView(t, token)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}

	code, body := b.page(t, browser, "/runs/x1")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `<form method="post" action="/login">`)
	assert.Contains(t, body, `name="next" value="/runs/x1"`)
	assert.Contains(t, body, `/ui/static/baton.css`)

	login := func(tok string) (int, string) {
		form := url.Values{"token": {tok}, "next": {"/runs/x1"}}
		req, err := http.NewRequest("POST", b.url+"/login", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "text/html")
		resp, err := browser.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	code, body = login("wrong")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, `id="login-error"`)
	assert.Contains(t, body, "not this server")
	assert.Contains(t, body, `<form method="post" action="/login">`, "the form again")

	code, body = login(token)
	assert.Equal(t, http.StatusNotFound, code, "back at /runs/x1, which does not exist: %s", body)
	assert.Contains(t, body, "x1")
	u, _ := url.Parse(b.url)
	cookies := jar.Cookies(u)
	require.Len(t, cookies, 1)
	assert.Equal(t, "baton_session", cookies[0].Name)
	assert.NotContains(t, cookies[0].Value, token)

	// Another runner with the same token accepts the session; one whose
	// token was rotated does not.
	for _, c := range []struct {
		token string
		want  int
	}{{token, http.StatusOK}, {"rotated-token", http.StatusUnauthorized}} {
		other := setupView(t, c.token)
		req, err := http.NewRequest("GET", other.url+"/v1/runs", nil)
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: cookies[0].Name, Value: cookies[0].Value})
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, c.want, resp.StatusCode, "token %s", c.token)
	}
	// The raw token is no longer a cookie value.
	req, err := http.NewRequest("GET", b.url+"/v1/runs", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "baton_session", Value: token})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// The fleet view shows each runner's kinds, queues, running nodes, round
// trip and margin, marks a thin margin as near expiry and an expired
// advertisement as lost.
func TestWorkersView(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	s, ctx := b.client.Store(), t.Context()
	now := time.Now()
	healthy := fence.WorkerInfo{ID: "healthy", Kinds: []string{"exec", "noop"}, Queues: []string{"default"}, SeenAt: now,
		LeaseTTLMs: 30000, AdvertiseEveryMs: 1000, Health: &fence.WorkerHealth{
			Running:   []fence.RunningNode{{Run: "pay-1", Node: "pay", Epoch: 2}},
			RenewedAt: now, RTTMs: 1.25, MarginMs: 20000, LeaseUntil: b.clock.Add(25 * time.Second)}}
	thin := fence.WorkerInfo{ID: "thin", Kinds: []string{"noop"}, Queues: []string{"default"}, SeenAt: now,
		LeaseTTLMs: 30000, AdvertiseEveryMs: 1000, Health: &fence.WorkerHealth{
			Running:   []fence.RunningNode{{Run: "r", Node: "n", Epoch: 1}},
			RenewedAt: now, RTTMs: 900, MarginMs: 4000, LeaseUntil: b.clock.Add(25 * time.Second)}}
	gone := fence.WorkerInfo{ID: "gone", Kinds: []string{"noop"}, Queues: []string{"default"}, SeenAt: now}
	require.NoError(t, s.Advertise(ctx, healthy, time.Hour))
	require.NoError(t, s.Advertise(ctx, thin, time.Hour))
	require.NoError(t, s.Advertise(ctx, gone, time.Second))
	b.m.FastForward(2 * time.Second)

	code, body := b.page(t, http.DefaultClient, "/workers")
	require.Equal(t, http.StatusOK, code, body)
	states := map[string]string{}
	for _, m := range regexp.MustCompile(`data-worker="([^"]+)" data-state="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		states[m[1]] = m[2]
	}
	assert.Equal(t, map[string]string{"healthy": "ok", "thin": "near expiry", "gone": "lost"}, states)
	assert.Contains(t, body, "1.2ms")
	assert.Contains(t, body, "20.00s", "the healthy margin")
	assert.Contains(t, body, `<a href="/runs/pay-1">pay-1</a>/pay`)
	assert.Contains(t, body, "exec, noop")
	code, frag := b.page(t, http.DefaultClient, "/workers/live")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, frag, `data-worker="thin" data-state="near expiry"`)
}

// The Asynq UI carries a link bar to the run and fleet views; its JSON API
// and assets are passed through untouched.
func TestMonitorLinksToTheViews(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	code, body := b.page(t, http.DefaultClient, "/monitor/")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `<div id="baton-bar"`)
	assert.Contains(t, body, `href="/runs"`)
	assert.Contains(t, body, `href="/workers"`)
	assert.Contains(t, body, `href="/schedules"`)
	code, body = b.page(t, http.DefaultClient, "/monitor/queues/default")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `id="baton-bar"`, "the SPA's deep links too")
	code, body = b.page(t, http.DefaultClient, "/monitor/api/queues")
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, "baton-bar")
	_, body = b.page(t, http.DefaultClient, "/runs")
	assert.Contains(t, body, `href="/monitor/"`, "the views link to the Asynq UI")
}

// A node that saved checkpoints lists them in its details, each linking
// to the API's page of its namespace.
func TestNodeDetailsListCheckpoints(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	ctx := t.Context()
	spec, err := runner.ParseSpec([]byte(`{"id":"turn-1","thread":"chat-9","nodes":[{"id":"agent","kind":"noop"}]}`))
	require.NoError(t, err)
	_, err = b.client.Submit(ctx, spec)
	require.NoError(t, err)
	s := b.client.Store()
	c, err := s.Claim(ctx, fence.NodeRef{Thread: "chat-9", Run: "turn-1", Node: "agent"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	for i := range 2 {
		_, err = s.SaveCheckpoint(ctx, c.Lease, fence.CheckpointWrite{NS: "graph", Data: []byte(`{"step":` + string(rune('1'+i)) + `}`)})
		require.NoError(t, err)
	}
	code, body := b.page(t, http.DefaultClient, "/runs/turn-1/nodes/agent")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="node-checkpoints"`)
	assert.Contains(t, body, `href="/v1/threads/chat-9/checkpoints?ns=graph"`)
	assert.Regexp(t, `(?s)>graph</a></td><td>1</td>.*>graph</a></td><td>2</td>`, body)

	_, body = b.page(t, http.DefaultClient, "/runs/turn-1")
	assert.Contains(t, body, `<a href="/runs?thread=chat-9">chat-9</a>`, "the run's thread links to its runs")
}

// A parked node's page shows what it asks and a resume form; posting the
// form answers the wait and the node is READY.
func TestResumeFromTheNodePage(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	ctx := t.Context()
	spec, err := runner.ParseSpec([]byte(`{"id":"w1","nodes":[{"id":"ask","kind":"noop"}]}`))
	require.NoError(t, err)
	_, err = b.client.Submit(ctx, spec)
	require.NoError(t, err)
	c, err := b.client.Store().Claim(ctx, fence.NodeRef{Thread: "w1", Run: "w1", Node: "ask"}, "wk", time.Minute, 0)
	require.NoError(t, err)
	_, err = b.client.Store().Park(ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"ship?"}`)})
	require.NoError(t, err)

	code, body := b.page(t, http.DefaultClient, "/runs/w1/nodes/ask")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "WAITING")
	assert.Contains(t, body, `{&#34;ask&#34;:&#34;ship?&#34;}`)
	assert.Contains(t, body, `id="resume-form"`)

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest("POST", b.url+"/runs/w1/nodes/ask/resume", strings.NewReader("value=%22yes%22"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	st, err := b.client.Status(ctx, "w1")
	require.NoError(t, err)
	assert.Equal(t, "READY", st.Nodes[0].State)
}

// A secret passed literally in a node's input (an exec env) is stored, as
// the spec said, but the node page shows it redacted; other values show.
func TestNodePageRedactsLiteralSecrets(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	spec, err := runner.ParseSpec([]byte(`{"id":"s1","nodes":[{"id":"a","kind":"exec","input":{"command":["true"],
		"env":{"OPENAI_API_KEY":"sk-live-123","DB_PASSWORD":"hunter2","MODE":"fast","REF":{"$env":"TOKEN"}}}}]}`))
	require.NoError(t, err)
	_, err = b.client.Submit(t.Context(), spec)
	require.NoError(t, err)
	code, body := b.page(t, http.DefaultClient, "/runs/s1/nodes/a")
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, "sk-live-123")
	assert.NotContains(t, body, "hunter2")
	assert.Contains(t, body, "[redacted]")
	assert.Contains(t, body, "fast")
	assert.Contains(t, body, "$env", "a reference is no secret")
}

// A node's result is shown as its input is: what looks secret by its name
// or shape is hidden (a key named like a credential, a URL's password, a
// bearer token in text), and so is any value the operator named
// (Config.Redact, REDACT_ENV), wherever it occurs in the input, the
// result or the error; the rest shows.
func TestNodePageRedactsResults(t *testing.T) {
	t.Parallel()
	m, rdb := redistest.Mini(t)
	m.SetTime(time.Now())
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	h, err := admin.New(admin.Config{Client: c, Redis: rdb, Logger: testLogger(t), Redact: kinds.NewRedactor("op-secret-9999")})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b := &viewBundle{m: m, rdb: rdb, client: c, url: srv.URL}

	spec, err := runner.ParseSpec([]byte(`{"id":"r1","nodes":[{"id":"a","kind":"noop","input":{"mode":"op-secret-9999 fast"}},
		{"id":"b","kind":"noop","max_attempts":1}]}`))
	require.NoError(t, err)
	_, err = c.Submit(t.Context(), spec)
	require.NoError(t, err)
	s := c.Store()
	claim, err := s.Claim(t.Context(), fence.NodeRef{Thread: "r1", Run: "r1", Node: "a"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = s.Commit(t.Context(), claim.Lease, []byte(`{"api_key":"sk-result-1","nested":{"DB_PASS":42},
		"target":"postgres://app:pw-result-2@db/x","log":"sent Authorization: Bearer tok-result-3","echo":"got op-secret-9999","rows":7}`), claim.Dependents)
	require.NoError(t, err)
	claim, err = s.Claim(t.Context(), fence.NodeRef{Thread: "r1", Run: "r1", Node: "b"}, "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = s.Fail(t.Context(), claim.Lease, fence.Failure{Err: "upstream said op-secret-9999 is wrong", Final: true}, claim.Descendants)
	require.NoError(t, err)

	code, body := b.page(t, http.DefaultClient, "/runs/r1/nodes/a")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `id="node-result"`)
	for _, secret := range []string{"sk-result-1", "pw-result-2", "tok-result-3", "op-secret-9999", ": 42"} {
		assert.NotContains(t, body, secret)
	}
	for _, shown := range []string{"postgres://app:[redacted]@db/x", "Bearer [redacted]", "got [redacted]", "[redacted] fast", "&#34;rows&#34;: 7"} {
		assert.Contains(t, body, shown)
	}
	code, body = b.page(t, http.DefaultClient, "/runs/r1/nodes/b")
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, "op-secret-9999")
	assert.Contains(t, body, "upstream said [redacted] is wrong")
}
