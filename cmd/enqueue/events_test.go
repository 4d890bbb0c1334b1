package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner/admin"
)

// eventTypes checks that every line is a JSON event with the documented
// keys and returns their types.
func eventTypes(t *testing.T, lines []string) []string {
	t.Helper()
	var types []string
	for _, l := range lines {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &e), l)
		for _, k := range []string{"id", "type", "node", "epoch", "worker", "at", "details"} {
			require.Contains(t, e, k, l)
		}
		_, err := time.Parse(time.RFC3339Nano, e["at"].(string))
		require.NoError(t, err)
		require.IsType(t, map[string]any{}, e["details"])
		types = append(types, e["type"].(string))
	}
	return types
}

func TestEventsJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, fmt.Sprintf(pair, "ev-1"))
	require.Equal(t, 0, b.run(t, "", "cancel", "ev-1", "--reason", "test").code)

	r := b.run(t, "", "events", "ev-1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Equal(t, []string{"submitted", "cancel_requested", "cancelled", "cancelled", "run_finished"}, eventTypes(t, lines))

	var cancelled struct {
		Node    string            `json:"node"`
		Worker  string            `json:"worker"`
		Details map[string]string `json:"details"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &cancelled))
	require.Equal(t, "a", cancelled.Node)
	require.Equal(t, "client", cancelled.Worker)
	require.Equal(t, "test", cancelled.Details["reason"])

	// The plain timeline has one line per event.
	r = b.run(t, "", "events", "ev-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 5)
	require.Regexp(t, `(?m)^\S+\s+cancelled\s+b@0\s+worker=client\s+reason=test$`, r.stdout)

	r = b.run(t, "", "events", "nope", "--json")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
}

func TestEventsFollowUntilTheRunEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, fmt.Sprintf(pair, "ev-2"))

	p := b.start(t, "events", "ev-2", "--json", "--follow", "--interval", "20ms")
	first := p.next(t)
	require.Equal(t, []string{"submitted"}, eventTypes(t, []string{first}))

	b.finish(t, "ev-2") // while events is polling
	rest, code := p.wait(t)
	require.Equal(t, 0, code, p.stderr.String())
	types := eventTypes(t, rest)
	require.NotEmpty(t, types)
	require.Equal(t, "run_finished", types[len(types)-1], "follow prints every event up to the end")
	require.Contains(t, types, "claimed")
}

// With --api, events --follow and watch read through the admin server's
// event stream (SSE) instead of Redis, with API_TOKEN as bearer token.
func TestFollowThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const token = "follow-api-token-0123456789"
	h, err := admin.New(admin.Config{Client: b.client, Redis: b.srv.Client(t), Token: token})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b.env = append(b.env, "API_TOKEN="+token)
	b.submit(t, fmt.Sprintf(pair, "ev-api"))

	ev := b.start(t, "events", "ev-api", "--json", "--follow", "--api", srv.URL)
	require.Equal(t, []string{"submitted"}, eventTypes(t, []string{ev.next(t)}))
	w := b.start(t, "watch", "ev-api", "--api", srv.URL)
	require.Regexp(t, `\sa\s+READY\s`, w.next(t))

	b.finish(t, "ev-api")
	rest, code := ev.wait(t)
	require.Equal(t, 0, code, ev.stderr.String())
	types := eventTypes(t, rest)
	require.Equal(t, "run_finished", types[len(types)-1])
	all, err := b.client.Events(t.Context(), "ev-api", "", 0)
	require.NoError(t, err)
	require.Len(t, rest, len(all)-1, "every event once")

	wrest, code := w.wait(t)
	require.Equal(t, 0, code, w.stderr.String())
	require.Regexp(t, `\srun ev-api\s+SUCCEEDED$`, wrest[len(wrest)-1])

	// A wrong token is bad input, said on stderr.
	b.env = append(b.env, "API_TOKEN=wrong")
	r := b.run(t, "", "events", "ev-api", "--follow", "--api", srv.URL)
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "401")
}
