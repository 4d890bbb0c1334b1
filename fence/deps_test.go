package fence_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A claim hands over the committed results of the node's direct
// dependencies; a replayed claim, a takeover and a continuation see the
// same values.
func TestClaimReadsDependencyResults(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("dia", node("a"), node("b", "a"), node("c", "a"), node("d", "b", "c"), node("e", "d")))
		a := tb.claim(t, "dia", "a", "w", longTTL)
		require.Empty(t, a.Deps)
		require.Nil(t, a.DepResults, "no deps, no read")
		tb.commit(t, a, `{"a":1}`)
		b := tb.claim(t, "dia", "b", "w", longTTL)
		require.Equal(t, map[string]json.RawMessage{"a": json.RawMessage(`{"a":1}`)}, b.DepResults)
		tb.commit(t, b, `{"b":[1,2]}`)
		c := tb.claim(t, "dia", "c", "w", longTTL)
		tb.commit(t, c, `"c"`)

		want := map[string]json.RawMessage{"b": json.RawMessage(`{"b":[1,2]}`), "c": json.RawMessage(`"c"`)}
		id := fence.NewClaimID()
		d, err := tb.store.ClaimAs(tb.ctx, ref("dia", "d"), "w1", id, shortTTL, grace)
		require.NoError(t, err)
		require.Equal(t, []string{"b", "c"}, d.Deps)
		require.Equal(t, want, d.DepResults)
		again, err := tb.store.ClaimAs(tb.ctx, ref("dia", "d"), "w1", id, shortTTL, grace)
		require.NoError(t, err)
		require.Equal(t, want, again.DepResults, "a replayed claim")

		tb.advance(t, pastExpiry)
		over, err := tb.store.Claim(tb.ctx, ref("dia", "d"), "w2", longTTL, grace)
		require.NoError(t, err)
		require.Equal(t, "w1", over.PrevOwner)
		require.Equal(t, want, over.DepResults, "a takeover")

		res, err := tb.store.CommitContinue(tb.ctx, over.Lease, []byte(`{"d":true}`), over.Dependents, serveAll())
		require.NoError(t, err)
		require.NotNil(t, res.Next)
		require.Equal(t, map[string]json.RawMessage{"d": json.RawMessage(`{"d":true}`)}, res.Next.DepResults,
			"a continuation")
	})
}

// A continuation gets the committing node's result without reading it
// back, and its other deps' results read from Redis; a replayed commit
// hands back the same values.
func TestContinuationReadsItsOtherDependencies(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("join", node("a"), node("b"), node("c", "a", "b")))
		tb.commit(t, tb.claim(t, "join", "a", "w", longTTL), `"from a"`)
		b := tb.claim(t, "join", "b", "w", longTTL)
		cont := serveAll()
		res, err := tb.store.CommitContinue(tb.ctx, b.Lease, []byte(`"from b"`), b.Dependents, cont)
		require.NoError(t, err)
		require.NotNil(t, res.Next)
		want := map[string]json.RawMessage{"a": json.RawMessage(`"from a"`), "b": json.RawMessage(`"from b"`)}
		require.Equal(t, want, res.Next.DepResults)
		again, err := tb.store.CommitContinue(tb.ctx, b.Lease, []byte(`"from b"`), b.Dependents, cont)
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.Equal(t, want, again.Next.DepResults)
	})
}

// A worker that does not run a node's kind is refused without changing
// the node: no epoch, no attempt, no event; a worker that runs it claims it.
func TestClaimRefusesAKindTheWorkerLacks(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("route", node("a")))
		_, err := tb.store.ClaimKinds(tb.ctx, ref("route", "a"), "stock", fence.NewClaimID(),
			[]string{"exec", "http"}, longTTL, grace)
		require.ErrorIs(t, err, fence.ErrKindNotServed)
		var ke *fence.KindError
		require.True(t, errors.As(err, &ke))
		require.Equal(t, "noop", ke.Kind)
		require.Equal(t, "default", ke.Queue)
		require.WithinDuration(t, tb.redisNow(t), ke.ReadyAt, time.Minute)
		require.True(t, fence.IsRefused(err))
		n := tb.nodeInfo(t, "route", "a")
		require.Equal(t, "READY", n.State)
		require.Zero(t, n.Attempt)
		require.Zero(t, n.Epoch)
		require.Empty(t, ofType(tb.events(t, "route"), "claimed"))

		c, err := tb.store.ClaimKinds(tb.ctx, ref("route", "a"), "custom", fence.NewClaimID(),
			[]string{"exec", "noop"}, longTTL, grace)
		require.NoError(t, err)
		require.Equal(t, int64(1), c.Attempt)
	})
}

// BenchmarkClaimFanIn measures a claim of a node with 100 dependencies of
// 1 KiB results each (the results read in one pipeline after the claim),
// beside a claim of a node without dependencies.
//
//	go test -run '^$' -bench ClaimFanIn ./fence/
func BenchmarkClaimFanIn(b *testing.B) {
	for _, deps := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("deps=%d", deps), func(b *testing.B) {
			s := benchStore(b)
			ctx := b.Context()
			result := []byte(`"` + strings.Repeat("x", 1022) + `"`)
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				run := fmt.Sprintf("fan-%d-%d", deps, i)
				a := fence.SubmitArgs{Run: run, Digest: run}
				var ids []string
				for j := range deps {
					id := fmt.Sprintf("p%d", j)
					ids = append(ids, id)
					a.Nodes = append(a.Nodes, fence.NodeSpec{ID: id, Kind: "noop", Queue: "default", Input: "null",
						Deps: []string{}, Dependents: []string{"sink"}, Descendants: []string{"sink"}, MaxAttempts: 1})
				}
				a.Nodes = append(a.Nodes, fence.NodeSpec{ID: "sink", Kind: "noop", Queue: "default", Input: "null",
					Deps: append([]string{}, ids...), Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1})
				if _, err := s.Submit(ctx, a); err != nil {
					b.Fatal(err)
				}
				for _, id := range ids {
					c, err := s.Claim(ctx, fence.NodeRef{Thread: run, Run: run, Node: id}, "w", time.Minute, time.Second)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Commit(ctx, c.Lease, result, c.Dependents); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				c, err := s.Claim(ctx, fence.NodeRef{Thread: run, Run: run, Node: "sink"}, "w", time.Minute, time.Second)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if len(c.DepResults) != deps {
					b.Fatalf("%d results, want %d", len(c.DepResults), deps)
				}
			}
		})
	}
}
