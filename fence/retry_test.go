package fence_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A FAILED diamond is re-run from its failed node: the SUCCEEDED nodes keep
// their results, the failed node and its cancelled dependents start again
// with max_attempts again and a newer epoch, a write from the failed attempt
// is refused, and the run's counters let it SUCCEED.
func TestRetryRerunsFailedNodes(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("rr", node("a"), node("b", "a").attempts(1), node("c", "a"), node("d", "b", "c")))
		tb.commit(t, tb.claim(t, "rr", "a", "w", longTTL), `"A"`)
		tb.commit(t, tb.claim(t, "rr", "c", "w", longTTL), `"C"`)
		b := tb.claim(t, "rr", "b", "w", longTTL)
		end, err := tb.store.Fail(tb.ctx, b.Lease, fence.Failure{Err: "boom"}, b.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Failed, end.Outcome)
		require.Equal(t, "FAILED", end.RunStatus)
		require.Equal(t, map[string]string{"a": "SUCCEEDED", "b": "FAILED", "c": "SUCCEEDED", "d": "CANCELLED"}, tb.states(t, "rr"))

		_, err = tb.store.Retry(tb.ctx, "nope", "r1", "test")
		require.ErrorIs(t, err, fence.ErrNotFound)
		res, err := tb.store.Retry(tb.ctx, "rr", "r1", "test")
		require.NoError(t, err)
		require.Equal(t, fence.Retried{Thread: "rr", Status: "RUNNING", Ready: []string{"b"}, Queues: []string{"default"}, Attempts: []int64{1}}, res)
		run := tb.getRun(t, "rr")
		require.Equal(t, "RUNNING", run.Status)
		require.Nil(t, run.FinishedAt)
		require.Equal(t, map[string]string{"a": "SUCCEEDED", "b": "READY", "c": "SUCCEEDED", "d": "BLOCKED"}, tb.states(t, "rr"))
		nb := tb.nodeInfo(t, "rr", "b")
		require.Equal(t, b.Epoch+1, nb.Epoch, "fenced like a claim: the epoch grows")
		require.Equal(t, nb.Attempt, nb.Releases, "no attempt used")
		require.Empty(t, nb.Error)

		// The same request again is a replay; another finds it RUNNING.
		again, err := tb.store.Retry(tb.ctx, "rr", "r1", "test")
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.Equal(t, []string{"b"}, again.Ready)
		other, err := tb.store.Retry(tb.ctx, "rr", "r2", "test")
		require.NoError(t, err)
		require.True(t, other.AlreadyRunning)

		// A late write from the failed attempt is refused.
		_, err = tb.store.Commit(tb.ctx, b.Lease, []byte(`"late"`), b.Dependents)
		require.ErrorIs(t, err, fence.ErrStaleEpoch)
		require.NotEmpty(t, ofType(tb.events(t, "rr"), "stale_rejected"))
		// The failed attempt's own fail, sent again (its reply lost), is
		// answered as the first time and changes nothing.
		stale := len(ofType(tb.events(t, "rr"), "stale_rejected"))
		again2, err := tb.store.Fail(tb.ctx, b.Lease, fence.Failure{Err: "late"}, b.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Failed, again2.Outcome)
		require.Len(t, ofType(tb.events(t, "rr"), "stale_rejected"), stale)
		require.Equal(t, "READY", tb.states(t, "rr")["b"])

		// b has its one attempt again and the run finishes.
		b2 := tb.claim(t, "rr", "b", "w2", longTTL)
		require.Equal(t, nb.Epoch+1, b2.Epoch)
		got := tb.commit(t, b2, `"B"`)
		require.Equal(t, []string{"d"}, got.Ready)
		d := tb.claim(t, "rr", "d", "w2", longTTL)
		require.Equal(t, "SUCCEEDED", tb.commit(t, d, `"D"`).RunStatus)
		run = tb.getRun(t, "rr")
		require.Equal(t, `"A"`, string(run.Nodes[0].Result), "kept")
		require.Equal(t, `"C"`, string(run.Nodes[2].Result), "kept")
		require.Len(t, ofType(tb.events(t, "rr"), "claimed"), 5, "a and c ran once")
		require.Len(t, ofType(tb.events(t, "rr"), "run_retried"), 1)

		_, err = tb.store.Retry(tb.ctx, "rr", "r3", "test")
		require.ErrorIs(t, err, fence.ErrNotRetryable, "a SUCCEEDED run has nothing to re-run")
		replay, err := tb.store.Retry(tb.ctx, "rr", "r1", "test")
		require.NoError(t, err, "the first request, retried late, is still its own success")
		require.True(t, replay.Replay)
	})
}

// A CANCELLED run is re-run from its cancelled nodes, running ones
// included once they ended; the cancel flag is cleared.
func TestRetryCancelledRun(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("rc", node("a"), node("b", "a")))
		a := tb.claim(t, "rc", "a", "w", longTTL)
		_, err := tb.store.Cancel(tb.ctx, "rc", "stop", "test")
		require.NoError(t, err)
		_, err = tb.store.Retry(tb.ctx, "rc", "r1", "test")
		require.NoError(t, err, "a node still running: the run is RUNNING, left alone")
		_, err = tb.store.Release(tb.ctx, a.Lease, "cancelled")
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", tb.getRun(t, "rc").Status)

		res, err := tb.store.Retry(tb.ctx, "rc", "r2", "test")
		require.NoError(t, err)
		require.Equal(t, []string{"a"}, res.Ready)
		run := tb.getRun(t, "rc")
		require.False(t, run.Cancelled)
		require.Empty(t, run.CancelReason)
		a2 := tb.claim(t, "rc", "a", "w", longTTL)
		tb.commit(t, a2, `1`)
		require.Equal(t, "SUCCEEDED", tb.commit(t, tb.claim(t, "rc", "b", "w", longTTL), `2`).RunStatus)
	})
}

// A thread's run is retried only while it is the thread's active run.
func TestRetryRefusedOnceTheThreadMovedOn(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		one := spec("t1", node("a").attempts(1))
		one.Thread, one.Multitask = "th", "enqueue"
		two := spec("t2", node("a"))
		two.Thread, two.Multitask = "th", "enqueue"
		tb.submit(t, one)
		tb.submit(t, two)
		tr := func(run, node string) fence.NodeRef { return fence.NodeRef{Thread: "th", Run: run, Node: node} }
		c, err := tb.store.Claim(tb.ctx, tr("t1", "a"), "w", longTTL, grace)
		require.NoError(t, err)
		_, err = tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "x"}, nil)
		require.NoError(t, err)
		_, err = tb.store.Promote(tb.ctx, "th", "w")
		require.NoError(t, err)

		_, err = tb.store.Retry(tb.ctx, "t1", "r1", "test")
		require.ErrorIs(t, err, fence.ErrNotActiveRun)
		require.ErrorContains(t, err, `moved on to run "t2"`)
		require.Equal(t, "FAILED", tb.getRun(t, "t1").Status)
	})
}

// Retry removes the expiry retention gave a finished run.
func TestRetryKeepsTheRunPastRetention(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("rk", node("a").attempts(1)))
		c := tb.claim(t, "rk", "a", "w", longTTL)
		_, err := tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "x"}, nil)
		require.NoError(t, err)
		_, err = tb.store.RetainFinished(tb.ctx, time.Hour, 10)
		require.NoError(t, err)
		_, err = tb.store.Retry(tb.ctx, "rk", "r1", "test")
		require.NoError(t, err)
		keys := tb.store.Keys()
		for _, k := range []string{keys.Run("rk", "rk"), keys.Node("rk", "rk", "a"), keys.Events("rk", "rk")} {
			ttl, err := tb.be.Client.TTL(tb.ctx, k).Result()
			require.NoError(t, err)
			require.Equal(t, time.Duration(-1), ttl, "%s persists", k)
		}
	})
}

// A retry that lands between a run's retention and the sweep's expiry of
// its locator (the sweeper paused after retaining it) leaves the re-opened
// run findable: its locator keeps no time to live.
func TestRetryBetweenRetentionAndTheLocatorsExpiry(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.failedThreadRun(t, "rl")

		keys := tb.store.Keys()
		retried := false
		sweeper := tb.hookedClient(t, beforeExpiry{key: keys.Locator("rl"), fn: func() {
			if !retried {
				retried = true
				_, err := tb.store.Retry(tb.ctx, "rl", "r1", "test")
				require.NoError(t, err)
			}
		}})
		n, err := fence.New(sweeper, nil).RetainFinished(tb.ctx, time.Hour, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.True(t, retried, "the retry ran before the locator's expiry")

		tb.requireReopened(t, "rl")
	})
}

// The other order: the sweep expires the locator after the retry's first
// persist and before its script re-opens the run. The retry persists it
// again.
func TestRetentionBetweenARetrysPersistAndItsScript(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.failedThreadRun(t, "rp")

		swept := 0
		retrier := tb.hookedClient(t, beforeScript{fn: func() {
			if swept == 0 {
				n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 10)
				require.NoError(t, err)
				swept = n
			}
		}})
		_, err := fence.New(retrier, nil).Retry(tb.ctx, "rp", "r1", "test")
		require.NoError(t, err)
		require.Equal(t, 1, swept, "the sweep retained the run before the retry's script")

		tb.requireReopened(t, "rp")
	})
}

// A retry refused (the run SUCCEEDED) leaves the retained run's locator
// with its time to live.
func TestRefusedRetryKeepsTheLocatorsExpiry(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.commit(t, tb.claimThreadRun(t, "rs", 3), `"A"`)
		_, err := tb.store.RetainFinished(tb.ctx, time.Hour, 10)
		require.NoError(t, err)

		_, err = tb.store.Retry(tb.ctx, "rs", "r1", "test")
		require.ErrorIs(t, err, fence.ErrNotRetryable)
		ttl, err := tb.be.Client.TTL(tb.ctx, tb.store.Keys().Locator("rs")).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 59*time.Minute, "the locator keeps its time to live")
	})
}

// beforeScript runs fn before sending a script.
type beforeScript struct{ fn func() }

func (b beforeScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (b beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			b.fn()
		}
		return next(ctx, cmd)
	}
}
func (b beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// failedThreadRun submits a one-node run of thread "t-"+run whose only
// attempt failed.
func (tb *testBundle) failedThreadRun(t *testing.T, run string) {
	t.Helper()
	c := tb.claimThreadRun(t, run, 1)
	_, err := tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "x"}, nil)
	require.NoError(t, err)
}

// claimThreadRun submits a run of thread "t-"+run with one node, "a", of
// attempts attempts, and claims it.
func (tb *testBundle) claimThreadRun(t *testing.T, run string, attempts int) *fence.Claimed {
	t.Helper()
	s := spec(run, node("a").attempts(attempts))
	s.Thread = "t-" + run
	tb.submit(t, s)
	c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: s.Thread, Run: run, Node: "a"}, "w", longTTL, grace)
	require.NoError(t, err)
	return c
}

// requireReopened requires run RUNNING again, its locator with no time
// to live.
func (tb *testBundle) requireReopened(t *testing.T, run string) {
	t.Helper()
	ttl, err := tb.be.Client.TTL(tb.ctx, tb.store.Keys().Locator(run)).Result()
	require.NoError(t, err)
	require.Equal(t, time.Duration(-1), ttl, "the re-opened run's locator persists")
	require.Equal(t, "RUNNING", tb.getRun(t, run).Status)
}

// hookedClient is a client of the bundle's Redis of its own, with hook.
func (tb *testBundle) hookedClient(t *testing.T, hook redis.Hook) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: tb.be.Client.(*redis.Client).Options().Addr})
	t.Cleanup(func() { _ = c.Close() })
	c.AddHook(hook)
	return c
}

// beforeExpiry runs fn before sending a pipeline that sets key's PEXPIRE.
type beforeExpiry struct {
	key string
	fn  func()
}

func (b beforeExpiry) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b beforeExpiry) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b beforeExpiry) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && c.Name() == "pexpire" && args[1] == b.key {
				b.fn()
				break
			}
		}
		return next(ctx, cmds)
	}
}
