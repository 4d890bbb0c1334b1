package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// limitGauges reads a runner's /metrics and returns the baton_limit_*
// series as `name{limit="..."}` -> value.
func limitGauges(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	code, body := get(t, "http://"+admin+"/metrics")
	require.Equal(t, http.StatusOK, code, body)
	out := map[string]float64{}
	for _, m := range limitLine.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err, m[0])
		out[m[1]] = v
	}
	return out
}

var limitLine = regexp.MustCompile(`(?m)^(baton_limits?_[a-z_]+(?:\{[^}]*\})?) (\S+)$`)

// A live runner's /metrics and its fleet view show each limit's use while
// nodes hold and wait for its slots: one node of three runs under a
// concurrency of 1, two wait; a prefix rule is one series summing its
// tenants, and the page lists them under it.
func TestLimitsInMetricsAndFleetView(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	for _, args := range [][]string{
		{"limit", "set", "deploy", "--concurrency", "1", "--rate", "600/m", "--burst", "4"},
		{"limit", "set", "tenant:*", "--concurrency", "1"},
	} {
		_, errOut, code := c.enqueue("", args...)
		require.Equal(t, 0, code, errOut)
	}
	r := c.startRunner("r0", map[string]string{"CONCURRENCY": "8"})
	hold := func(lim string) string {
		return `{"kind":"sleep","input":{"duration":"120s"},"limits":["` + lim + `"]}`
	}
	c.submit(`{"id":"deploys","nodes":[{"id":"d1",` + hold("deploy")[1:] + `,{"id":"d2",` + hold("deploy")[1:] +
		`,{"id":"d3",` + hold("deploy")[1:] + `]}`)
	c.submit(`{"id":"acme","nodes":[{"id":"t",` + hold("tenant:{thread}")[1:] + `]}`)
	c.submit(`{"id":"globex","nodes":[{"id":"t",` + hold("tenant:{thread}")[1:] + `]}`)

	want := map[string]float64{
		`baton_limit_in_use{limit="deploy"}`:          1,
		`baton_limit_waiting{limit="deploy"}`:         2,
		`baton_limit_concurrency{limit="deploy"}`:     1,
		`baton_limit_rate_per_second{limit="deploy"}`: 10,
		`baton_limit_burst{limit="deploy"}`:           4,
		`baton_limit_keys{limit="deploy"}`:            1,
		`baton_limit_in_use{limit="tenant:*"}`:        2,
		`baton_limit_waiting{limit="tenant:*"}`:       0,
		`baton_limit_keys{limit="tenant:*"}`:          2,
		`baton_limits_unreadable`:                     0,
	}
	var got map[string]float64
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last limit series read: %v", got)
		}
	})
	waitUntil(t, 30*time.Second, "the runner's /metrics to show the held and waiting slots", func() bool {
		got = limitGauges(t, r.admin)
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	})
	// burst+1 = 5 when idle; the claim spent one, which refills at 10/s.
	require.GreaterOrEqual(t, got[`baton_limit_tokens_left{limit="deploy"}`], 4.0)
	require.LessOrEqual(t, got[`baton_limit_tokens_left{limit="deploy"}`], 5.0)
	require.NotContains(t, got, `baton_limit_tokens_left{limit="tenant:*"}`, "a rule with no rate has no tokens")

	ctx := newBrowser(t, 60*time.Second)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("http://"+r.admin+"/workers"),
		chromedp.WaitVisible(chromedp.CSS(`#limits tr[data-limit="deploy"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#limits tr[data-key="tenant:globex"]`))))
	row := func(sel string) []string {
		cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll(`+strconv.Quote(sel+" td")+`), td => td.innerText.trim())`))
		require.NoError(t, err)
		return cells
	}
	assert.Equal(t, []string{"deploy", "1 at once, 600/m (burst 4)", "1 of 1", "", "2"}, blankTokens(row(`#limits tr[data-limit="deploy"]:not([data-key])`)))
	assert.Equal(t, []string{"↳ tenant:acme", "—", "1 of 1", "—", "0"}, row(`#limits tr[data-key="tenant:acme"]`))
	rule := row(`#limits tr[data-limit="tenant:*"]:not([data-key])`)
	require.Len(t, rule, 5)
	assert.Equal(t, []string{"1 at once", "2 over 2 keys", "—", "0"}, rule[1:])
	screenshot(t, ctx, "workers-limits.png", false)
}

// blankTokens blanks a row's tokens cell, which refills as the test reads.
func blankTokens(cells []string) []string {
	if len(cells) == 5 {
		cells[3] = ""
	}
	return cells
}
