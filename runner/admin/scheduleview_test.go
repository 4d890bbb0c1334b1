package admin_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/spec"
)

var scheduleRowTag = regexp.MustCompile(`(?s)<tr data-schedule="([^"]+)"[^>]*>(.*?)</tr>`)

// scheduleCells reads the table of a /schedules page: name -> the text
// of its cells.
func scheduleCells(body string) map[string][]string {
	out := map[string][]string{}
	for _, m := range scheduleRowTag.FindAllStringSubmatch(body, -1) {
		var cells []string
		for _, c := range cellTag.FindAllStringSubmatch(m[2], -1) {
			cells = append(cells, strings.Join(strings.Fields(htmlTag.ReplaceAllString(c[1], " ")), " "))
		}
		out[m[1]] = cells
	}
	return out
}

// The schedules page lists each schedule with its cron, zone, missed
// policy, thread and strategy, its next tick (in UTC and in its own zone)
// and its last tick with the run it submitted, linked to the run view and
// showing that run's state; with none it says how to add one.
func TestSchedulesView(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	ctx := t.Context()
	code, body := b.page(t, http.DefaultClient, "/schedules")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="no-schedules"`)
	assert.Contains(t, body, "enqueue schedule add NAME")
	assert.Contains(t, body, `<a href="/schedules" class="on">Schedules</a>`, "the navigation links the page")

	// Redis's clock at a known instant: 2026-12-04 13:59:30 UTC.
	b.clock = time.Date(2026, 12, 4, 13, 59, 30, 0, time.UTC)
	b.m.SetTime(b.clock)
	run, err := spec.ParseAs([]byte(`{"nodes":[{"id":"a","kind":"noop"}]}`), spec.JSON)
	require.NoError(t, err)
	threaded, err := spec.ParseAs([]byte(`{"thread":"sync","multitask":"enqueue","nodes":[{"id":"a","kind":"noop"}]}`), spec.JSON)
	require.NoError(t, err)
	for _, s := range []*spec.Schedule{
		{Name: "nightly", Cron: "0 3 * * *", TZ: "Europe/Paris", Thread: "nightly", Run: run},
		{Name: "sync", Cron: "*/5 * * * *", Missed: spec.MissedLatest, Run: threaded},
		{Name: "minutely", Cron: "* * * * *", Run: run},
	} {
		_, _, err := b.client.PutSchedule(ctx, s)
		require.NoError(t, err, s.Name)
	}
	b.advance(45 * time.Second) // 14:00:15: sync's and minutely's 14:00 ticks are due
	fired, err := b.client.FireDue(ctx, time.Minute)
	require.NoError(t, err)
	require.Len(t, fired, 2, "%+v", fired)

	code, body = b.page(t, http.DefaultClient, "/schedules")
	require.Equal(t, http.StatusOK, code, body)
	got := scheduleCells(body)
	const layout = "2006-01-02 15:04:05.000 MST" // the run view's
	at := func(h, m int) string { return time.Date(2026, 12, 4, h, m, 0, 0, time.UTC).Local().Format(layout) }
	nightly := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC).Local().Format(layout)
	assert.Equal(t, map[string][]string{
		"minutely": {"minutely", "* * * * *", "UTC", "skip", "—", at(14, 1) + " in 45s", at(14, 0),
			"cron.minutely.20261204T140000Z RUNNING created"},
		"nightly": {"nightly", "0 3 * * *", "Europe/Paris", "skip", "nightly reject",
			nightly + " 2026-12-05 03:00:00.000 CET in 11h", "—", "—"},
		"sync": {"sync", "*/5 * * * *", "UTC", "latest", "sync enqueue", at(14, 5) + " in 4m", at(14, 0),
			"cron.sync.20261204T140000Z RUNNING created"},
	}, got)
	assert.Contains(t, body, `<a href="/runs/cron.sync.20261204T140000Z">`, "the last run links to the run view")
	assert.Contains(t, body, `<time datetime="2026-12-04T14:05:00Z">`)
	code, _ = b.page(t, http.DefaultClient, "/runs/cron.sync.20261204T140000Z")
	assert.Equal(t, http.StatusOK, code)

	// The live fragment the page polls carries the same table.
	code, frag := b.page(t, http.DefaultClient, "/schedules/live")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, got, scheduleCells(frag))
	assert.NotContains(t, frag, "<html")
}

// With a token, the schedules page asks a browser to log in first.
func TestSchedulesViewNeedsLogin(t *testing.T) {
	t.Parallel()
	b := setupView(t, "s3cret-token-for-the-ui")
	code, body := b.page(t, http.DefaultClient, "/schedules")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `name="next" value="/schedules"`)
	assert.NotContains(t, body, `id="schedules"`)
	code, body = b.page(t, http.DefaultClient, "/schedules/live")
	assert.NotContains(t, body, `data-schedule`)
	assert.NotEqual(t, http.StatusInternalServerError, code)
}
