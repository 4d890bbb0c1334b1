package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// enqueue stream prints a run's stream from the start, then live as an
// attempt appends, until the run ends; --after resumes after an id and
// prints nothing twice; --json prints each entry as an object.
func TestStreamFollowsUntilTheRunEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, fmt.Sprintf(`{"id": "%s", "nodes": [{"id": "a", "kind": "noop"}]}`, "st-1"))
	ctx := context.Background()
	store := b.client.Store()
	c, err := store.Claim(ctx, fence.NodeRef{Thread: "st-1", Run: "st-1", Node: "a"}, "test-worker", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.AppendStream(ctx, c.Lease, 0, []fence.StreamChunk{{Event: "messages", Data: json.RawMessage(`["He"]`)}})
	require.NoError(t, err)

	p := b.start(t, "stream", "st-1")
	require.Regexp(t, `^\d+-\d+ metadata \{.*"run_id":"st-1".*\}$`, p.next(t))
	first := p.next(t)
	require.Regexp(t, `^\d+-\d+ messages \["He"\]$`, first)

	_, err = store.AppendStream(ctx, c.Lease, 1, []fence.StreamChunk{{Event: "messages", Data: json.RawMessage(`["llo"]`)}})
	require.NoError(t, err)
	require.Regexp(t, `^\d+-\d+ messages \["llo"\]$`, p.next(t), "printed live")
	_, err = store.Commit(ctx, c.Lease, []byte(`1`), c.Dependents)
	require.NoError(t, err)
	rest, code := p.wait(t)
	require.Equal(t, 0, code, p.stderr.String())
	require.Empty(t, rest, "ends with the run")

	id := strings.Fields(first)[0]
	r := b.run(t, "", "stream", "st-1", "--after", id, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var line struct {
		ID      string          `json:"id"`
		Event   string          `json:"event"`
		Data    json.RawMessage `json:"data"`
		Node    string          `json:"node"`
		Attempt int64           `json:"attempt"`
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1, r.stdout)
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
	require.Equal(t, "messages", line.Event)
	require.JSONEq(t, `["llo"]`, string(line.Data))
	require.Equal(t, "a", line.Node)
	require.Equal(t, int64(1), line.Attempt)

	r = b.run(t, "", "stream", "nope")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
	r = b.run(t, "", "stream", "st-1", "--after", "x")
	require.Equal(t, 2, r.code)
}
