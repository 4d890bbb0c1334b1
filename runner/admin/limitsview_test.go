package admin_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

var (
	limitRowTag = regexp.MustCompile(`(?s)<tr data-limit="([^"]+)"(?: data-key="([^"]+)")?[^>]*>(.*?)</tr>`)
	cellTag     = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
	htmlTag     = regexp.MustCompile(`<[^>]+>`)
)

// limitCells reads the limits table of a /workers page: "name" or
// "name key" -> the text of its cells.
func limitCells(body string) map[string][]string {
	out := map[string][]string{}
	for _, m := range limitRowTag.FindAllStringSubmatch(body, -1) {
		id := strings.TrimSpace(m[1] + " " + m[2])
		var cells []string
		for _, c := range cellTag.FindAllStringSubmatch(m[3], -1) {
			cells = append(cells, strings.Join(strings.Fields(htmlTag.ReplaceAllString(c[1], " ")), " "))
		}
		out[id] = cells
	}
	return out
}

// The fleet view lists every limit with what is set, the slots in use,
// the rate tokens left and the nodes waiting; a prefix rule adds up its
// keys and lists them; a cell with nothing to show has a dash.
func TestWorkersViewShowsLimits(t *testing.T) {
	t.Parallel()
	b := setupView(t, "")
	ctx, s := t.Context(), b.client.Store()
	code, body := b.page(t, http.DefaultClient, "/workers")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "No limit is set")

	require.NoError(t, b.client.SetLimit(ctx, fence.Limit{Name: "openai", Concurrency: 1, Rate: 60, Period: time.Hour, Burst: 4}))
	require.NoError(t, b.client.SetLimit(ctx, fence.Limit{Name: "tenant:*", Concurrency: 1}))
	require.NoError(t, b.client.SetLimit(ctx, fence.Limit{Name: "search", Rate: 10, Period: time.Second}))
	for _, r := range []string{"o1", "o2", "acme1", "acme2", "globex1"} {
		lim := map[string]string{"o": "openai", "a": "tenant:acme", "g": "tenant:globex"}[r[:1]]
		spec, err := runner.ParseSpec([]byte(`{"id":"` + r + `","nodes":[{"id":"n","kind":"noop","limits":["` + lim + `"]}]}`))
		require.NoError(t, err)
		_, err = b.client.Submit(ctx, spec)
		require.NoError(t, err)
		_, err = s.Claim(ctx, fence.NodeRef{Thread: r, Run: r, Node: "n"}, "w1", time.Minute, 0)
		if r == "o2" || r == "acme2" {
			require.ErrorIs(t, err, fence.ErrLimitWait, r)
		} else {
			require.NoError(t, err, r)
		}
	}

	code, body = b.page(t, http.DefaultClient, "/workers")
	require.Equal(t, http.StatusOK, code, body)
	got := limitCells(body)
	assert.Equal(t, map[string][]string{
		"openai":                 {"openai", "1 at once, 60/h (burst 4)", "1 of 1", "4", "1"},
		"search":                 {"search", "10/s", "—", "1", "—"},
		"tenant:*":               {"tenant:* prefix rule: each key its own limit", "1 at once", "2 over 2 keys", "—", "1"},
		"tenant:* tenant:acme":   {"↳ tenant:acme", "—", "1 of 1", "—", "1"},
		"tenant:* tenant:globex": {"↳ tenant:globex", "—", "1 of 1", "—", "0"},
	}, got)

	// The live fragment the page polls carries the table too.
	code, frag := b.page(t, http.DefaultClient, "/workers/live")
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, got, limitCells(frag))
}
