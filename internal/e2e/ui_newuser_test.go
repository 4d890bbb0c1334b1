package e2e

import (
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// viewTime is how the views write an instant: with its date and zone.
var viewTime = regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [A-Z]{3}`)

// What a new user found wrong in the run view, read in headless Chromium
// from a runner binary: a cancelled run's bar and count, a queued run that
// names the run it waits behind now and stops saying so once it starts,
// instants with their date and zone, a node's own URL, a delayed run's
// start, a queue paused with enqueue pause, and dashes where the workers
// page has nothing to show.
func TestRunViewTellsTheTruthInChromium(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	c := newCluster(t)
	r := c.startRunner("rv", nil)
	ctx := newBrowser(t, 90*time.Second)
	base := "http://" + r.admin
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	open := func(path string) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS(`#run-status`))))
	}

	// A run delayed by start_in shows when it starts, on the page and on
	// its node; cancelled, its bar has no green and it counts no success.
	delayed := c.submit(`{"id":"later-1","start_in":"1h","nodes":[{"id":"only","kind":"noop"}]}`)
	open("/runs/" + delayed)
	start := text(`#run-start`)
	assert.Regexp(t, `^starts at `+viewTime.String()+`$`, start)
	box, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('svg#dag g[data-node="only"] .owner').textContent`))
	require.NoError(t, err)
	assert.Regexp(t, `^due \d\d:\d\d:\d\d [A-Z]{3}$`, box, "the READY node says when it is due")
	assert.Regexp(t, `submitted `+viewTime.String(), text(`.summary`))
	_, errOut, code := c.enqueue("", "cancel", delayed)
	require.Equal(t, 0, code, errOut)
	open("/runs/" + delayed)
	assert.Equal(t, "CANCELLED", text(`#run-status`))
	assert.Equal(t, "0/1 nodes succeeded", text(`#run-done`))
	segs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#run-bar .seg')).map(s => s.dataset.state + ' ' + s.getAttribute('width') + ' ' + getComputedStyle(s).fill)`))
	require.NoError(t, err)
	assert.Equal(t, []string{"CANCELLED 100.00% rgb(107, 114, 128)"}, segs, "the bar is the cancelled colour, not green")
	assert.Regexp(t, `finished `+viewTime.String(), text(`.summary`))

	// Three runs of one thread: q2 and q3 wait behind q1. Once q1 ends,
	// q2 runs and q3 waits behind q2, not behind the q1 it was submitted
	// behind; q2's page no longer says it is queued.
	thread := func(id, secs string) string {
		return `{"id":"` + id + `","thread":"chat-1","multitask":"enqueue","nodes":[{"id":"talk","kind":"sleep","input":{"duration":"` + secs + `"}}]}`
	}
	q1 := c.submit(thread("q1", "30s"))
	q2 := c.submit(thread("q2", "30s"))
	q3 := c.submit(thread("q3", "1s"))
	open("/runs/" + q3)
	assert.Equal(t, "queued behind run q1", text(`#run-behind`))
	open("/runs/" + q2)
	_, errOut, code = c.enqueue("", "cancel", q1)
	require.Equal(t, 0, code, errOut)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#run-status').textContent === 'RUNNING'`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "q2's open page did not follow it to RUNNING")
	gone, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('#run-behind') === null`))
	require.NoError(t, err)
	assert.True(t, gone, "a running run is not queued behind anything")
	open("/runs/" + q3)
	assert.Equal(t, "queued behind run q2", text(`#run-behind`))

	// A node's URL opens the run page with that node's details, and a
	// click on another node puts that one in the address bar.
	two := c.submit(`{"id":"two-1","nodes":[{"id":"a","kind":"noop"},{"id":"b","kind":"noop","deps":["a"]}]}`)
	require.Equal(t, 0, c.watch(two))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/runs/"+two+"#node=b"),
		chromedp.WaitVisible(chromedp.CSS(`#detail .node-detail[data-node="b"]`))))
	link, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#node-link").href`))
	require.NoError(t, err)
	u, err := url.Parse(link)
	require.NoError(t, err)
	assert.Equal(t, "/runs/two-1", u.Path)
	assert.Equal(t, "node=b", u.Fragment)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`svg#dag g[data-node="a"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#detail .node-detail[data-node="a"]`))))
	hash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`))
	require.NoError(t, err)
	assert.Equal(t, "#node=a", hash)
	assert.Regexp(t, `1\s+e1\s+rv\s+claimed\s+`+viewTime.String(), text(`#node-attempts`), "an attempt's time has its date and zone")
	screenshot(t, ctx, "run-view-node-link.png", false)

	// A paused queue: the page names it and the held node says so; once
	// the queue is resumed the open page follows the run to its end.
	_, errOut, code = c.enqueue("", "pause", "default")
	require.Equal(t, 0, code, errOut)
	held := c.submit(`{"id":"held-9","nodes":[{"id":"h","kind":"noop"}]}`)
	open("/runs/" + held)
	assert.Contains(t, text(`.flag.paused[data-queue="default"]`), "queue default is paused")
	note, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('svg#dag g[data-node="h"] .owner').textContent`))
	require.NoError(t, err)
	assert.Equal(t, "queue default paused", note)
	_, errOut, code = c.enqueue("", "unpause", "default")
	require.Equal(t, 0, code, errOut)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#run-status').textContent === 'SUCCEEDED'`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the page did not follow the resumed run")

	// The workers page: every cell says something, a dash where there is
	// nothing yet; the page says why asynqmon's Processed misses chains.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+"/workers"), chromedp.WaitVisible(chromedp.CSS(`#workers`))))
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#workers tbody td')).map(td => td.innerText.trim())`))
	require.NoError(t, err)
	require.NotEmpty(t, cells)
	for i, cell := range cells {
		assert.NotEmpty(t, cell, "cell %d of the workers table is blank: %q", i, cells)
	}
	note = text(`#processed-note`)
	assert.Contains(t, note, "Processed")
	assert.True(t, strings.Contains(note, "chain"), note)
}
