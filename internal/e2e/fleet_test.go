package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

var workerRow = regexp.MustCompile(`data-worker="([^"]+)" data-state="([^"]+)"`)

// fleetStates reads /workers/live from a runner's admin server: each
// runner's state as the fleet view shows it.
func fleetStates(t *testing.T, admin string) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/workers/live")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	out := map[string]string{}
	for _, m := range workerRow.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestWorkersViewShowsAPausedRunner: a runner holding a lease is paused
// with SIGSTOP. The fleet view, read from another runner, shows it near
// expiry while its lease runs out, then lost; the page in Chromium says
// so too.
func TestWorkersViewShowsAPausedRunner(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	c := newCluster(t)
	// ra's lease is a little longer than the suite's, so that its near
	// expiry lasts over a second however busy the machine is.
	ra := c.startRunner("ra", map[string]string{"LEASE_TTL": "4s", "HEARTBEAT_INTERVAL": "1s"})
	run := c.submit(`{"id":"long-1","nodes":[{"id":"think","kind":"sleep","input":{"duration":"60s"}}]}`)
	waitUntil(t, 30*time.Second, "ra to run the node", func() bool {
		return c.status(run).node("think").Owner == "ra"
	})
	rb := c.startRunner("rb", nil)
	waitUntil(t, 30*time.Second, "both runners listed, ra ok and advertising a renewal of its lease", func() bool {
		s := fleetStates(t, rb.admin)
		var list struct{ Workers []fence.WorkerInfo }
		_, body := get(t, "http://"+rb.admin+"/v1/workers")
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		i := slices.IndexFunc(list.Workers, func(w fence.WorkerInfo) bool { return w.ID == "ra" })
		return s["ra"] == "ok" && s["rb"] != "" && i >= 0 && list.Workers[i].Health != nil &&
			len(list.Workers[i].Health.Running) == 1 && !list.Workers[i].Health.RenewedAt.IsZero()
	})

	ra.signal(t, syscall.SIGSTOP)
	paused := time.Now()
	var seen []string // ra's states, in order, without repeats
	waitUntil(t, 30*time.Second, "ra shown as lost", func() bool {
		st := fleetStates(t, rb.admin)["ra"]
		if len(seen) == 0 || seen[len(seen)-1] != st {
			seen = append(seen, st)
			t.Logf("+%s ra: %s", time.Since(paused).Round(time.Millisecond), st)
		}
		return st == "lost"
	})
	require.Contains(t, seen, "near expiry", "ra went from %v without being shown near expiry", seen)
	assert.Less(t, slices.Index(seen, "near expiry"), slices.Index(seen, "lost"))
	assert.NotContains(t, seen[:slices.Index(seen, "near expiry")], "lost")

	// rb takes the node over; the page shows ra lost and rb running it.
	waitUntil(t, 30*time.Second, "rb to take the node over", func() bool {
		return c.status(run).node("think").Owner == "rb"
	})
	ctx := newBrowser(t, 60*time.Second)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("http://"+rb.admin+"/workers"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-worker="ra"][data-state="lost"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-worker="rb"]`))))
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-worker="rb"]`)))
	require.NoError(t, err)
	assert.Contains(t, text, "long-1/think", "rb runs the node it took over")
	assert.Contains(t, text, "e2")
	text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-worker="ra"]`)))
	require.NoError(t, err)
	assert.Contains(t, text, "lost")
	screenshot(t, ctx, "workers-view.png", true)
}
