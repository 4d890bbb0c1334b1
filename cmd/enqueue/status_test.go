package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A released attempt is not counted against max_attempts, results show in
// the table (cut) and in --json (whole), and the human timeline prints
// times and durations rather than epoch milliseconds.
func TestStatusShowsResultsAndAttemptsUsed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	run := b.submit(t, `{"id": "st-1", "nodes": [{"id": "a", "kind": "noop", "max_attempts": 1},
		{"id": "b", "kind": "noop", "max_attempts": 2}]}`)
	store := b.client.Store()
	ref := func(n string) fence.NodeRef { return fence.NodeRef{Thread: run, Run: run, Node: n} }

	// a: claimed, released (a shutdown), claimed again and committed.
	c, err := store.Claim(ctx, ref("a"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Release(ctx, c.Lease, "shutdown")
	require.NoError(t, err)
	c, err = store.Claim(ctx, ref("a"), "w2", time.Minute, 0)
	require.NoError(t, err)
	long := `{"text":"` + strings.Repeat("x", 200) + `"}`
	_, err = store.Commit(ctx, c.Lease, []byte(long), c.Dependents)
	require.NoError(t, err)

	// b: one failed attempt, retried in a minute.
	c, err = store.Claim(ctx, ref("b"), "w1", time.Minute, 0)
	require.NoError(t, err)
	_, err = store.Fail(ctx, c.Lease, fence.Failure{Err: "boom", Delay: 90 * time.Second}, c.Descendants)
	require.NoError(t, err)

	r := b.run(t, "", "status", run)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^a\s+SUCCEEDED\s+2 \(1/1 used\)\s+2\s+w2\s+100%\s+\{"text":"x+…\s+-$`, r.stdout)
	require.NotContains(t, r.stdout, "2/1")
	require.NotContains(t, r.stdout, long, "the table cuts results")
	require.Regexp(t, `(?m)^b\s+READY\s+1/2\s+1\s+w1\s+0%\s+-\s+boom$`, r.stdout)

	s := b.status(t, run)
	require.JSONEq(t, long, string(s.Nodes[0].Result), "--json prints the whole result")

	r = b.run(t, "", "events", run)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^\S+\s+retry_scheduled\s+b@1\s+worker=w1\s+ready_at=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, r.stdout)
	r = b.run(t, "", "events", run, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `"ready_at":"\d{13}"`, r.stdout, "--json keeps the stored values")
}

func TestHumanDetail(t *testing.T) {
	t.Parallel()
	require.Equal(t, "1.5s", humanDetail("overdue_ms", "1500"))
	require.Equal(t, "2025-06-01T12:00:00.123Z", humanDetail("lease_until", "1748779200123"))
	require.Equal(t, "3", humanDetail("attempt", "3"))
	require.Equal(t, "soon", humanDetail("ready_at", "soon"))
}
