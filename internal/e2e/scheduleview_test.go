package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A live runner's schedules page, in Chromium: a schedule a runner fires
// every second shows its cron, zone, policy, thread and strategy, its
// next tick and its last tick's run, which the page refreshes by itself
// and whose link opens the run view.
func TestSchedulesPageInChromium(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.startRunner("r0", map[string]string{"SCHEDULE_INTERVAL": "100ms"})
	_, errOut, code := c.enqueue(`{"nodes": [{"id": "a", "kind": "noop"}]}`,
		"schedule", "add", "tick", "--cron", "* * * * * *", "--tz", "Europe/Paris", "--missed", "latest",
		"--thread", "ticks", "--multitask", "enqueue", "-")
	require.Equal(t, 0, code, errOut)

	ctx := newBrowser(t, 60*time.Second)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("http://"+r.admin+"/schedules"),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="tick"]`))))
	// The page polls its fragment: the first tick's run appears without a
	// reload, and later ticks replace it.
	var first string
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`(() => {
		const a = document.querySelector('#schedules tr[data-schedule="tick"] td.run a');
		return a !== null && a.textContent.startsWith('cron.tick.');
	})()`, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the first tick's run shows on the page")
	first, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#schedules tr[data-schedule="tick"] td.run a').textContent`))
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('#schedules tr[data-schedule="tick"] td.run a').textContent !== `+
		`"`+first+`"`, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "a later tick's run replaces %s without a reload", first)

	cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#schedules tr[data-schedule="tick"] td'), td => td.innerText.trim())`))
	require.NoError(t, err)
	require.Len(t, cells, 8)
	assert.Equal(t, []string{"tick", "* * * * * *", "Europe/Paris", "latest", "ticks enqueue"}, cells[:5])
	assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.000 UTC\n\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.000 CET\nin \ds$`, cells[5], "next tick")
	assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.000 UTC\n\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.000 CET$`, cells[6], "last tick")
	assert.Contains(t, cells[7], "cron.tick.")
	screenshot(t, ctx, "schedules.png", false)

	// The last run's link opens its run view.
	run, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#schedules tr[data-schedule="tick"] td.run a').textContent`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#schedules tr[data-schedule="tick"] td.run a`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status`))))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(loc, "/runs/"+run), "%s opens %s", run, loc)
}
