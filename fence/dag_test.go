package fence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// diamond is a -> b, a -> c, b,c -> d.
func diamond(run string) fence.SubmitArgs {
	return spec(run, node("a"), node("b", "a"), node("c", "a"), node("d", "b", "c"))
}

// TestDAGDiamond: a node becomes READY when its last dependency commits,
// and the run succeeds when every node has.
func TestDAGDiamond(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		res := tb.submit(t, diamond("dia"))
		require.Equal(t, []string{"a"}, res.Ready)
		require.Equal(t, "RUNNING", res.Status)
		_, err := tb.store.Claim(tb.ctx, ref("dia", "b"), "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeBlocked)

		a := tb.claim(t, "dia", "a", "w", longTTL)
		require.ElementsMatch(t, []string{"b", "c"}, a.Dependents)
		require.ElementsMatch(t, []string{"b", "c", "d"}, a.Descendants)
		got := tb.commit(t, a, `1`)
		require.ElementsMatch(t, []string{"b", "c"}, got.Ready)
		require.Equal(t, "RUNNING", got.RunStatus)
		require.Equal(t, map[string]string{"a": "SUCCEEDED", "b": "READY", "c": "READY", "d": "BLOCKED"}, tb.states(t, "dia"))

		b := tb.claim(t, "dia", "b", "w", longTTL)
		got = tb.commit(t, b, `2`)
		require.Empty(t, got.Ready, "d still waits for c")
		require.Equal(t, "BLOCKED", tb.nodeInfo(t, "dia", "d").State)
		_, err = tb.store.Claim(tb.ctx, ref("dia", "d"), "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeBlocked)

		c := tb.claim(t, "dia", "c", "w", longTTL)
		got = tb.commit(t, c, `3`)
		require.Equal(t, []string{"d"}, got.Ready)
		require.Equal(t, "RUNNING", got.RunStatus)

		d := tb.claim(t, "dia", "d", "w", longTTL)
		require.Empty(t, d.Dependents)
		require.Empty(t, d.Descendants)
		got = tb.commit(t, d, `4`)
		require.Empty(t, got.Ready)
		require.Equal(t, "SUCCEEDED", got.RunStatus)

		run := tb.getRun(t, "dia")
		require.Equal(t, "SUCCEEDED", run.Status)
		require.NotNil(t, run.FinishedAt)
		for _, n := range run.Nodes {
			require.Equal(t, "SUCCEEDED", n.State, n.ID)
		}
		require.Equal(t, []string{"b", "c"}, run.Nodes[3].Deps)
		require.Len(t, ofType(tb.events(t, "dia"), "run_finished"), 1)
	})
}

// TestDAGFinalFailure: a permanent failure fails the node, cancels what
// depends on it, and the run ends FAILED once the other branch is done.
func TestDAGFinalFailure(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, diamond("ff"))
		tb.commit(t, tb.claim(t, "ff", "a", "w", longTTL), `1`)
		b := tb.claim(t, "ff", "b", "w", longTTL)
		c := tb.claim(t, "ff", "c", "w", longTTL)

		end, err := tb.store.Fail(tb.ctx, b.Lease, fence.Failure{Err: "boom", Final: true}, b.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Failed, end.Outcome)
		require.Equal(t, "RUNNING", end.RunStatus, "c is still running")
		require.Equal(t, map[string]string{"a": "SUCCEEDED", "b": "FAILED", "c": "RUNNING", "d": "CANCELLED"}, tb.states(t, "ff"))
		require.Equal(t, "boom", tb.nodeInfo(t, "ff", "b").Error)
		require.Equal(t, int64(1), tb.nodeInfo(t, "ff", "b").Attempt, "final: no retry though attempts remain")

		got := tb.commit(t, c, `3`)
		require.Empty(t, got.Ready, "a cancelled dependent never becomes READY")
		require.Equal(t, "FAILED", got.RunStatus)
		require.Equal(t, "CANCELLED", tb.nodeInfo(t, "ff", "d").State)
		run := tb.getRun(t, "ff")
		require.Equal(t, "FAILED", run.Status)
		require.NotNil(t, run.FinishedAt)

		_, err = tb.store.Claim(tb.ctx, ref("ff", "d"), "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeDone)
		_, err = tb.store.Claim(tb.ctx, ref("ff", "b"), "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeDone)
	})
}

// TestFailRetryBackoff: a failure with attempts left schedules a retry on
// Redis time; the node cannot be claimed before it is due.
func TestFailRetryBackoff(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		const delay = 300 * time.Millisecond
		tb.submit(t, spec("retry", node("n").attempts(3)))
		c := tb.claim(t, "retry", "n", "w", longTTL)

		end, err := tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "flaky", Delay: delay}, c.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Retrying, end.Outcome)
		require.True(t, end.ReadyAt.After(tb.redisNow(t)), "ReadyAt %v is in the future", end.ReadyAt)
		n := tb.nodeInfo(t, "retry", "n")
		require.Equal(t, "READY", n.State)
		require.Equal(t, "flaky", n.Error)

		_, err = tb.store.Claim(tb.ctx, ref("retry", "n"), "w2", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNotDue)
		var nd *fence.NotDueError
		require.True(t, errors.As(err, &nd))
		require.Equal(t, end.ReadyAt.UnixMilli(), nd.ReadyAt.UnixMilli())
		require.Equal(t, c.Epoch, tb.nodeInfo(t, "retry", "n").Epoch, "a refused claim changes nothing")

		tb.advance(t, delay+10*time.Millisecond)
		c2 := tb.claim(t, "retry", "n", "w2", longTTL)
		require.Equal(t, c.Attempt+1, c2.Attempt)
		require.Equal(t, c.Epoch+1, c2.Epoch)
		require.Empty(t, c2.PrevOwner, "a retry is no takeover")

		_, err = tb.store.Commit(tb.ctx, c.Lease, []byte(`"first"`), c.Dependents)
		require.ErrorIs(t, err, fence.ErrStaleEpoch, "the failed attempt cannot commit later")
		tb.commit(t, c2, `"second"`)
		require.JSONEq(t, `"second"`, string(tb.nodeInfo(t, "retry", "n").Result))

		evs := tb.events(t, "retry")
		require.Len(t, ofType(evs, "retry_scheduled"), 1)
		failed := ofType(evs, "failed")
		require.Len(t, failed, 1)
		require.Equal(t, "0", failed[0].Details["final"])
	})
}

// TestFailAttemptsExhausted: with max_attempts 2, the second failure is
// final.
func TestFailAttemptsExhausted(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("exh", node("n").attempts(2), node("m", "n")))
		c := tb.claim(t, "exh", "n", "w", longTTL)
		end, err := tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "one"}, c.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Retrying, end.Outcome)

		c = tb.claim(t, "exh", "n", "w", longTTL)
		require.Equal(t, int64(2), c.Attempt)
		end, err = tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "two"}, c.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Failed, end.Outcome)
		require.Equal(t, "FAILED", end.RunStatus)
		require.Equal(t, map[string]string{"n": "FAILED", "m": "CANCELLED"}, tb.states(t, "exh"))
		require.Equal(t, "two", tb.nodeInfo(t, "exh", "n").Error)

		_, err = tb.store.Claim(tb.ctx, ref("exh", "n"), "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeDone)
		// The same call again (a retry after a lost reply) answers as the
		// first did and changes nothing.
		again, err := tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "three"}, c.Descendants)
		require.NoError(t, err)
		require.Equal(t, end, again)
		require.Equal(t, "two", tb.nodeInfo(t, "exh", "n").Error)
		require.Len(t, ofType(tb.events(t, "exh"), "run_finished"), 1)
		// Another write of the same claim is refused.
		_, err = tb.store.Commit(tb.ctx, c.Lease, []byte(`"late"`), nil)
		require.ErrorIs(t, err, fence.ErrNotRunning, "the owner's own late write")
		require.True(t, fence.IsFenced(err))
	})
}

// TestReleaseKeepsAttempt: a released node is READY at once and the release
// does not use up an attempt.
func TestReleaseKeepsAttempt(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("rel", node("n").attempts(1)))
		c := tb.claim(t, "rel", "n", "w", longTTL)
		end, err := tb.store.Release(tb.ctx, c.Lease, "shutdown")
		require.NoError(t, err)
		require.Equal(t, fence.Retrying, end.Outcome)
		require.Equal(t, "READY", tb.nodeInfo(t, "rel", "n").State)

		_, err = tb.store.Heartbeat(tb.ctx, c.Lease, longTTL, 5)
		require.ErrorIs(t, err, fence.ErrNotRunning, "the released lease is spent")
		again, err := tb.store.Release(tb.ctx, c.Lease, "again")
		require.NoError(t, err, "a retried release answers as the first")
		require.Equal(t, end, again)
		_, err = tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "late"}, nil)
		require.ErrorIs(t, err, fence.ErrNotRunning, "a released claim cannot fail the node")

		c2 := tb.claim(t, "rel", "n", "w2", longTTL) // no Advance: READY now
		require.Equal(t, int64(2), c2.Attempt)
		require.Equal(t, c.Epoch+1, c2.Epoch)
		_, err = tb.store.Commit(tb.ctx, c.Lease, []byte(`"old"`), nil)
		require.ErrorIs(t, err, fence.ErrStaleEpoch)
		got := tb.commit(t, c2, `"done"`)
		require.Equal(t, "SUCCEEDED", got.RunStatus)
		require.Equal(t, "SUCCEEDED", tb.nodeInfo(t, "rel", "n").State)

		rel := ofType(tb.events(t, "rel"), "released")
		require.Len(t, rel, 1)
		require.Equal(t, "shutdown", rel[0].Details["reason"])

		// Three releases, then a failure: still one failed attempt of two.
		tb.submit(t, spec("rel2", node("n").attempts(2)))
		for range 3 {
			c := tb.claim(t, "rel2", "n", "w", longTTL)
			_, err := tb.store.Release(tb.ctx, c.Lease, "shutdown")
			require.NoError(t, err)
		}
		c = tb.claim(t, "rel2", "n", "w", longTTL)
		require.Equal(t, int64(4), c.Attempt)
		end, err = tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "first real failure"}, nil)
		require.NoError(t, err)
		require.Equal(t, fence.Retrying, end.Outcome, "releases used no attempt")
	})
}

// TestCommitReplay: a commit retried after a lost reply is recognised and
// changes nothing.
func TestCommitReplay(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("rep", node("a"), node("b", "a")))
		a := tb.claim(t, "rep", "a", "w", longTTL)
		first := tb.commit(t, a, `"r1"`)
		require.False(t, first.Replay)
		require.Equal(t, []string{"b"}, first.Ready)

		again, err := tb.store.Commit(tb.ctx, a.Lease, []byte(`"r2"`), a.Dependents)
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.Equal(t, []string{"b"}, again.Ready, "the dependent the first try made READY, to enqueue")
		require.Equal(t, "RUNNING", again.RunStatus, "a replay does not count the node twice")

		require.JSONEq(t, `"r1"`, string(tb.nodeInfo(t, "rep", "a").Result))
		require.Equal(t, "RUNNING", tb.getRun(t, "rep").Status)
		require.Len(t, ofType(tb.events(t, "rep"), "committed"), 1)

		got := tb.commit(t, tb.claim(t, "rep", "b", "w", longTTL), `"b"`)
		require.Equal(t, "SUCCEEDED", got.RunStatus)
		again, err = tb.store.Commit(tb.ctx, a.Lease, []byte(`"r3"`), a.Dependents)
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.Empty(t, again.Ready, "b is no longer READY")
		require.Equal(t, "SUCCEEDED", again.RunStatus)
		require.Len(t, ofType(tb.events(t, "rep"), "run_finished"), 1)
	})
}
