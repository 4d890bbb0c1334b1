package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
