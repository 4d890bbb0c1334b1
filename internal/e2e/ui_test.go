package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunViewInChromium drives the run view in headless Chromium through
// the scenario baton exists for: runner ra owns the http node pay, is
// paused with SIGSTOP mid-request past its lease, rb takes pay over with
// epoch 2 and finishes the run, and ra's late write, once it wakes, is
// refused. The page, opened while the run is active, follows it live; it
// then shows every node with its state and epoch, the takeover and the
// refused write in the timeline, and pay's attempts on click. It runs
// without a token and with one, through the login form.
func TestRunViewInChromium(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	for _, tc := range []struct{ name, token, shot string }{
		{"no token", "", "run-view.png"},
		{"token", "ui-test-token-0123456789", "run-view-login.png"},
	} {
		t.Run(tc.name, func(t *testing.T) { runViewScenario(t, tc.token, tc.shot) })
	}
}

// payServer answers the pay node's POSTs; the first owner's (epoch 1) is
// held until release is closed.
type payServer struct {
	*httptest.Server
	first   chan struct{}
	release chan struct{}
	once    sync.Once
}

// answer lets the held first request be answered.
func (p *payServer) answer() { p.once.Do(func() { close(p.release) }) }

func newPayServer(t *testing.T) *payServer {
	p := &payServer{first: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		epoch := r.Header.Get("Baton-Epoch")
		if epoch == "1" {
			once.Do(func() { close(p.first) })
			<-p.release
		}
		fmt.Fprintf(w, `{"charged":42,"epoch":%s}`, epoch)
	}))
	t.Cleanup(p.Close)
	t.Cleanup(p.answer) // before Close, which waits for the held request
	return p
}

func runViewScenario(t *testing.T, token, shot string) {
	c := newCluster(t)
	env := map[string]string{"EGRESS_ALLOW": "127.0.0.1"} // the pay server runs here
	if token != "" {
		env["API_TOKEN"] = token
	}
	pay := newPayServer(t)
	ra := c.startRunner("ra", env)
	body, _ := json.Marshal(map[string]any{"url": pay.URL, "body": map[string]any{"amount": 42}})
	run := c.submit(`{"id":"checkout-7","nodes":[
		{"id":"prepare","kind":"noop","input":{"cart":"c-7"}},
		{"id":"pay","kind":"http","deps":["prepare"],"input":` + string(body) + `},
		{"id":"reserve","kind":"noop","deps":["prepare"]},
		{"id":"notify","kind":"noop","deps":["pay","reserve"]},
		{"id":"audit","kind":"noop","deps":["notify"]}]}`)
	select {
	case <-pay.first:
	case <-time.After(30 * time.Second):
		t.Fatal("the pay node never reached the server")
	}
	// reserve, a sibling of pay, commits at once; ra is paused only then,
	// so that pay is the one node taken over.
	waitUntil(t, 30*time.Second, "reserve to commit", func() bool {
		for _, e := range c.events(run) {
			if e.Type == "committed" && e.Node == "reserve" {
				return true
			}
		}
		return false
	})
	ra.signal(t, syscall.SIGSTOP) // paused mid-request
	rb := c.startRunner("rb", env)

	ctx := newBrowser(t, 90*time.Second)
	page := "http://" + rb.admin + "/runs/" + run
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(page)))
	if token != "" {
		// A wrong token shows the form again with a message; the right
		// one leads back to the run.
		require.NoError(t, chromedp.Do(ctx,
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), "not-the-token"),
			chromedp.Click(chromedp.ID("login-submit")),
			chromedp.WaitVisible(chromedp.ID("login-error")),
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Click(chromedp.ID("login-submit")),
		))
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`svg#dag g[data-node="pay"]`))))

	// The page follows the run without a reload: rb takes pay over and
	// the run ends.
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.querySelector('#run-status') && document.querySelector('#run-status').textContent === 'SUCCEEDED'`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	require.NoError(t, err, "the open page did not show the run SUCCEEDED:\n%s", rb.log.String())

	// Let ra's late answer arrive and ra wake up: its write is refused.
	pay.answer()
	ra.signal(t, syscall.SIGCONT)
	waitUntil(t, 30*time.Second, "ra's stale write to be refused", func() bool {
		for _, e := range c.events(run) {
			if e.Type == "stale_rejected" && e.Worker == "ra" {
				return true
			}
		}
		return false
	})

	require.NoError(t, chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`svg#dag g[data-node="pay"]`))))
	type drawn struct {
		ID, State, Owner string
		Epoch            string
		Text             string
	}
	nodes, err := chromedp.Run(ctx, chromedp.Evaluate[[]drawn](`Array.from(document.querySelectorAll('svg#dag g.node')).map(g => ({
		ID: g.dataset.node, State: g.dataset.state, Owner: g.dataset.owner, Epoch: g.dataset.epoch, Text: g.textContent}))`))
	require.NoError(t, err)
	got := map[string]string{}
	for _, n := range nodes {
		got[n.ID] = n.State + " e" + n.Epoch
		assert.Contains(t, n.Text, "e"+n.Epoch, "node %s shows its epoch", n.ID)
		assert.Contains(t, n.Text, n.State, "node %s shows its state", n.ID)
		if n.ID == "pay" {
			assert.Equal(t, "rb", n.Owner, "the new owner")
			assert.Contains(t, n.Text, "attempt 2")
		}
	}
	assert.Equal(t, map[string]string{"prepare": "SUCCEEDED e1", "pay": "SUCCEEDED e2", "reserve": "SUCCEEDED e1",
		"notify": "SUCCEEDED e1", "audit": "SUCCEEDED e1"}, got)

	type row struct{ Type, Node, Epoch, Text string }
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]row](`Array.from(document.querySelectorAll('#timeline tr.ev')).map(r => ({
		Type: r.dataset.type, Node: r.dataset.node, Epoch: r.dataset.epoch, Text: r.innerText}))`))
	require.NoError(t, err)
	var takeover, refused *row
	for i := range rows {
		switch r := &rows[i]; {
		case r.Type == "takeover" && takeover == nil:
			takeover = r
		case r.Type == "stale_rejected" && refused == nil:
			refused = r
		}
	}
	require.NotNil(t, takeover, "no takeover in the timeline: %v", rows)
	assert.Equal(t, "pay", takeover.Node)
	assert.Equal(t, "2", takeover.Epoch)
	assert.Contains(t, takeover.Text, "⇄ takeover", "the takeover is marked")
	assert.Contains(t, takeover.Text, "prev_owner=ra")
	require.NotNil(t, refused, "no refused write in the timeline: %v", rows)
	assert.Equal(t, "1", refused.Epoch)
	assert.Contains(t, refused.Text, "refused")
	summary, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(".summary")))
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`1 takeover\b`), summary)

	// A click on pay shows its input and both attempts.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`svg#dag g[data-node="pay"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail .node-detail[data-node="pay"] #node-attempts`))))
	detail, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#detail`)))
	require.NoError(t, err)
	assert.Contains(t, detail, pay.URL, "its input")
	assert.Contains(t, detail, `"charged": 42`, "its result")
	assert.Regexp(t, `1\s+e1\s+ra\s+claimed`, detail)
	assert.Regexp(t, `2\s+e2\s+rb\s+takeover`, detail)
	screenshot(t, ctx, shot, token == "")
	if t.Failed() {
		t.Logf("page text:\n%s", strings.TrimSpace(summary))
	}
}
