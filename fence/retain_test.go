package fence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// A run that ends is queued for retention by the script that ended it;
// RetainFinished gives its keys a time to live. Unfinished runs are never
// touched.
func TestFinishedRunsGetARetention(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("kept", node("a"), node("b", "a")))
		tb.submit(t, spec("running", node("a")))
		tb.submit(t, spec("cancelled", node("a")))
		threaded := spec("threaded", node("a"))
		threaded.Thread = "t-retain" // its locator is in another slot
		tb.submit(t, threaded)
		n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Zero(t, n, "nothing has ended")

		c := tb.claim(t, "kept", "a", "w", longTTL)
		tb.commit(t, c, `1`)
		c = tb.claim(t, "kept", "b", "w", longTTL)
		tb.commit(t, c, `2`)
		_, err = tb.store.Cancel(tb.ctx, "cancelled", "test", "t")
		require.NoError(t, err)
		_, err = tb.store.Cancel(tb.ctx, "threaded", "test", "t")
		require.NoError(t, err)

		r, err := tb.store.RetainBatch(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, fence.Retained{Runs: 3}, r, "all three, and none left behind")
		rdb := tb.be.Client
		keys := tb.store.Keys()
		// A run that SUCCEEDED is packed into one key in place of its
		// hashes and stream (retain.lua); the others keep theirs.
		gone, err := rdb.Exists(tb.ctx, keys.Run("kept", "kept"), keys.Events("kept", "kept"),
			keys.Node("kept", "kept", "a"), keys.Node("kept", "kept", "b")).Result()
		require.NoError(t, err)
		require.Zero(t, gone, "the SUCCEEDED run is packed")
		for _, k := range []string{keys.Packed("kept", "kept"), keys.Run("cancelled", "cancelled"),
			keys.Run("t-retain", "threaded"), keys.Node("t-retain", "threaded", "a"), keys.Locator("threaded")} {
			ttl, err := rdb.TTL(tb.ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, 59*time.Minute, k)
			require.LessOrEqual(t, ttl, time.Hour, k)
		}
		ttl, err := rdb.TTL(tb.ctx, keys.Run("running", "running")).Result()
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl, "a running run never expires")
		require.Equal(t, "SUCCEEDED", tb.getRun(t, "kept").Status, "still readable until it expires")
		n, err = tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Zero(t, n, "each run is handled once")

		trimmed, err := tb.store.TrimRuns(tb.ctx, time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, int64(4), trimmed)
		ids, err := tb.store.ListRuns(tb.ctx, 0, 10)
		require.NoError(t, err)
		require.Empty(t, ids)
	})
}

// A retention whose reply was lost after retain.lua ran (the runner saw an
// error, or died before its next step) leaves no key without a time to
// live: the next call gives the locator of a thread's run, which lives in
// another slot, its time to live. A run retried in between keeps its
// locator for good.
func TestRetentionAfterALostReply(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		dropper, lossyStore := tb.lossyStore(t)
		rdb := tb.be.Client
		keys := tb.store.Keys()
		ttl := func(key string) time.Duration {
			t.Helper()
			d, err := rdb.TTL(tb.ctx, key).Result()
			require.NoError(t, err)
			return d
		}
		retainLosingReply := func(run string) {
			t.Helper()
			threaded := spec(run, node("a"))
			threaded.Thread = "t-" + run
			tb.submit(t, threaded)
			_, err := tb.store.Cancel(tb.ctx, run, "test", "t")
			require.NoError(t, err)
			dropper.loseNext("retain", 1)
			_, err = lossyStore.RetainFinished(tb.ctx, time.Hour, 100)
			require.ErrorIs(t, err, errReplyLost)
			require.Greater(t, ttl(keys.Run("t-"+run, run)), 59*time.Minute, "the script ran")
			require.Equal(t, time.Duration(-1), ttl(keys.Locator(run)), "the step after the script did not")
		}

		retainLosingReply("lost-retain")
		n, err := lossyStore.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Zero(t, n, "the run was retained already")
		require.Greater(t, ttl(keys.Locator("lost-retain")), 59*time.Minute, "the locator expires with its run")
		require.LessOrEqual(t, ttl(keys.Locator("lost-retain")), time.Hour)
		require.Equal(t, "CANCELLED", tb.getRun(t, "lost-retain").Status, "still readable by id until then")

		retainLosingReply("retried")
		_, err = tb.store.Retry(tb.ctx, "retried", "retry-1", "test")
		require.NoError(t, err)
		_, err = lossyStore.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl(keys.Locator("retried")), "a running run stays findable")
		require.Equal(t, time.Duration(-1), ttl(keys.Run("t-retried", "retried")))
		require.Equal(t, "RUNNING", tb.getRun(t, "retried").Status)

		for shard := range fence.Shards {
			left, err := rdb.Exists(tb.ctx, keys.Finished(shard)).Result()
			require.NoError(t, err)
			require.Zero(t, left, "nothing left to do")
		}
	})
}

// unreachable is a go-redis hook that keeps every pipelined command on
// key from reaching Redis and fails it, as when the key's master is down.
type unreachable struct{ key string }

var errUnreachable = errors.New("test: master unreachable")

func (u unreachable) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (u unreachable) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (u unreachable) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var sent []redis.Cmder
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && args[1] == u.key {
				c.SetErr(errUnreachable)
				continue
			}
			sent = append(sent, c)
		}
		if len(sent) == len(cmds) {
			return next(ctx, cmds)
		}
		if len(sent) > 0 {
			_ = next(ctx, sent)
		}
		return errUnreachable // as a cluster pipeline answers when one master fails
	}
}

// A locator that cannot be reached when its run is retained keeps its run
// id in the finished index, and gets its time to live from a later call;
// the others are done at once, and so are runs that ended after it.
func TestRetentionWithALocatorUnreachable(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		keys := tb.store.Keys()
		for _, run := range []string{"loc-down", "loc-up"} {
			threaded := spec(run, node("a"))
			threaded.Thread = "t-" + run
			tb.submit(t, threaded)
			_, err := tb.store.Cancel(tb.ctx, run, "test", "t")
			require.NoError(t, err)
		}
		cut := tb.hookedClient(t, unreachable{keys.Locator("loc-down")})
		n, err := fence.New(cut, nil).RetainFinished(tb.ctx, time.Hour, 100)
		require.ErrorIs(t, err, errUnreachable)
		require.Equal(t, 2, n, "both runs retained")

		rdb := tb.be.Client
		ttl := func(key string) time.Duration {
			t.Helper()
			d, err := rdb.TTL(tb.ctx, key).Result()
			require.NoError(t, err)
			return d
		}
		require.Greater(t, ttl(keys.Locator("loc-up")), 59*time.Minute)
		require.Equal(t, time.Duration(-1), ttl(keys.Locator("loc-down")))
		var left []string
		for shard := range fence.Shards {
			ids, err := rdb.ZRange(tb.ctx, keys.Finished(shard), 0, -1).Result()
			require.NoError(t, err)
			left = append(left, ids...)
		}
		require.Equal(t, []string{"loc-down"}, left, "only the unreachable locator is left for later")

		// The id waits at the far end of its index and never holds back a
		// run of the same shard that ended after it, even one id at a time
		// and with the locator still out of reach. With more ids than the
		// limit a call takes one batch at random (RetainBatch), so it may
		// take the unreachable one again: a few calls retain the other.
		behind := spec("loc-behind", node("a"))
		behind.Thread = "t-loc-down"
		tb.submit(t, behind)
		_, err = tb.store.Cancel(tb.ctx, "loc-behind", "test", "t")
		require.NoError(t, err)
		retained := 0
		for range 64 {
			r, err := fence.New(cut, nil).RetainBatch(tb.ctx, time.Hour, 1)
			if err != nil {
				require.ErrorIs(t, err, errUnreachable)
			}
			require.True(t, r.Behind, "two ids wait with a limit of one")
			if retained += r.Runs; retained > 0 {
				break
			}
		}
		require.Equal(t, 1, retained, "the run behind the unreachable locator is retained")
		require.Greater(t, ttl(keys.Locator("loc-behind")), 59*time.Minute)

		n, err = tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Greater(t, ttl(keys.Locator("loc-down")), 59*time.Minute, "done once reachable")
	})
}

// TestOldLayout: the global indexes of the layout before shards are
// reported, so that a runner can warn about runs it will not see.
func TestOldLayout(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	s := fence.New(rdb, nil)
	old, err := s.OldLayout(t.Context())
	require.NoError(t, err)
	require.Empty(t, old)
	_, err = s.Submit(t.Context(), spec("new-layout", node("a")))
	require.NoError(t, err)
	old, err = s.OldLayout(t.Context())
	require.NoError(t, err)
	require.Empty(t, old, "the sharded layout's keys are not mistaken for old ones")
	require.NoError(t, rdb.ZAdd(t.Context(), "baton:leases", redis.Z{Score: 1, Member: "t:r:n"}).Err())
	old, err = s.OldLayout(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"baton:leases"}, old)
}

// Redis preallocates 4 KiB per stream node. Submit stores the stream it
// creates at its size, and later events grow it by what they need; the
// retention stores again at its size a stream that holds a preallocation
// (one submitted before, or grown past a node), of a run kept as its keys
// (one that FAILED): every event is still
// there, under the same ids, with the time to live.
func TestRetentionCompactsTheEventStream(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		rdb := tb.be.Client
		key := tb.store.Keys().Events("short", "short")
		usage := func() int64 {
			size, err := rdb.MemoryUsage(tb.ctx, key).Result()
			require.NoError(t, err)
			return size
		}
		tb.submit(t, spec("short", node("a")))
		if tb.be.Real != nil {
			require.Less(t, usage(), int64(1000), "a run just submitted: its stream at its size")
		}
		c := tb.claim(t, "short", "a", "w", longTTL)
		// CANCELLED: a run that SUCCEEDED or FAILED is packed into one key
		// instead (retain.lua).
		_, err := tb.store.Cancel(tb.ctx, "short", "enough", "test")
		require.NoError(t, err)
		end, err := tb.store.Fail(tb.ctx, c.Lease, fence.Failure{Err: "boom", Final: true}, c.Descendants)
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", end.RunStatus)
		before, err := rdb.XRange(tb.ctx, key, "-", "+").Result()
		require.NoError(t, err)
		require.NotEmpty(t, before)
		if tb.be.Real != nil {
			require.Less(t, usage(), int64(1500), "grown by what its events need")
			// As submitted before submit compacted it: the same events in
			// a stream made by XADD, with its node's preallocation.
			require.NoError(t, rdb.Del(tb.ctx, key).Err())
			for _, m := range before {
				require.NoError(t, rdb.XAdd(tb.ctx, &redis.XAddArgs{Stream: key, ID: m.ID, Values: m.Values}).Err())
			}
			require.Greater(t, usage(), int64(4096))
		}

		n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		after, err := rdb.XRange(tb.ctx, key, "-", "+").Result()
		require.NoError(t, err)
		require.Equal(t, before, after, "every event kept")
		ttl, err := rdb.TTL(tb.ctx, key).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 59*time.Minute)
		if tb.be.Real != nil {
			require.Less(t, usage(), int64(1500), "stored at its size, not in a 4 KiB preallocation")
		}
		// A later event (a stale write refused) is appended as before.
		stale := c.Lease
		stale.Epoch--
		_, err = tb.store.Heartbeat(tb.ctx, stale, time.Minute, 0)
		require.Error(t, err)
		again, err := rdb.XLen(tb.ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, int64(len(before)+1), again)
	})
}

// A SUCCEEDED run is retained slimmer: its hashes lose the fields of a live
// node and those at their default, are packed into one key, and read
// exactly as before. A replayed commit and a resubmission are still
// recognised. A FAILED run, which can be retried, is packed with every
// field, and its retry writes it back as its keys, value for value, and
// runs.
func TestRetentionSlimsSucceededRuns(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		rdb, keys := tb.be.Client, tb.store.Keys()
		tb.submit(t, spec("slim", node("a"), node("b", "a")))
		a := tb.claim(t, "slim", "a", "w", longTTL)
		tb.commit(t, a, `"ra"`)
		b := tb.claim(t, "slim", "b", "w", longTTL)
		require.Equal(t, "SUCCEEDED", tb.commit(t, b, `"rb"`).RunStatus)

		tb.submit(t, spec("broke", node("a"), node("b", "a")))
		fa := tb.claim(t, "broke", "a", "w", longTTL)
		tb.commit(t, fa, `"ra"`)
		fb := tb.claim(t, "broke", "b", "w", longTTL)
		end, err := tb.store.Fail(tb.ctx, fb.Lease, fence.Failure{Err: "boom", Final: true}, fb.Descendants)
		require.NoError(t, err)
		require.Equal(t, "FAILED", end.RunStatus)

		fields := func(key string) map[string]string {
			h, err := rdb.HGetAll(tb.ctx, key).Result()
			require.NoError(t, err)
			return h
		}
		before := tb.getRun(t, "slim")
		brokeNodes := map[string]map[string]string{}
		for _, id := range []string{"a", "b"} {
			brokeNodes[id] = fields(keys.Node("broke", "broke", id))
		}
		n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, 2, n)

		require.Equal(t, before, tb.getRun(t, "slim"), "a retained run reads as before")
		raw, err := rdb.Get(tb.ctx, keys.Packed("slim", "slim")).Bytes()
		require.NoError(t, err, "a SUCCEEDED run is packed into one key")
		run, packedNodes, err := fence.UnpackForTest(raw)
		require.NoError(t, err)
		require.Len(t, packedNodes, 2)
		na, nb := packedNodes[0], packedNodes[1]
		for _, f := range []string{"id", "run", "thread", "remaining", "lease_until", "end_op",
			"releases", "timeout_ms", "retry", "prev_owner", "ready_at", "inc", "progress", "created_at", "updated_at"} {
			require.NotContains(t, na, f)
			require.NotContains(t, nb, f)
		}
		require.NotContains(t, na, "deps", "no dependencies: the default")
		require.Equal(t, `["a"]`, nb["deps"], "dependencies are kept")
		require.Equal(t, `["b"]`, na["dependents"])
		for _, f := range []string{"state", "epoch", "claim", "attempt", "max_attempts", "owner",
			"result", "input", "started_at", "finished_at"} {
			require.Contains(t, nb, f)
		}
		for _, f := range []string{"id", "thread", "behind", "multitask", "failed", "cancel", "updated_at"} {
			require.NotContains(t, run, f)
		}

		again, err := tb.store.Commit(tb.ctx, b.Lease, []byte(`"other"`), b.Dependents)
		require.NoError(t, err, "a commit replayed after retention")
		require.True(t, again.Replay)
		require.Equal(t, "SUCCEEDED", again.RunStatus)
		res, err := tb.store.Submit(tb.ctx, spec("slim", node("a"), node("b", "a")))
		require.NoError(t, err)
		require.False(t, res.Created, "the same run submitted again is the stored one")
		require.Equal(t, "SUCCEEDED", res.Status)
		require.Equal(t, before, tb.getRun(t, "slim"))

		raw, err = rdb.Get(tb.ctx, keys.Packed("broke", "broke")).Bytes()
		require.NoError(t, err, "a FAILED run is packed into one key")
		_, packedNodes, err = fence.UnpackForTest(raw)
		require.NoError(t, err)
		require.Equal(t, []map[string]string{brokeNodes["a"], brokeNodes["b"]}, packedNodes,
			"a run that can be retried keeps every field")
		_, err = tb.store.Retry(tb.ctx, "broke", "r1", "test")
		require.NoError(t, err)
		require.Equal(t, brokeNodes["a"], fields(keys.Node("broke", "broke", "a")), "written back as it was")
		gone, err := rdb.Exists(tb.ctx, keys.Packed("broke", "broke")).Result()
		require.NoError(t, err)
		require.Zero(t, gone, "the retried run is its keys again")
		rb := tb.claim(t, "broke", "b", "w", longTTL)
		require.Equal(t, "SUCCEEDED", tb.commit(t, rb, `"rb"`).RunStatus)
	})
}

// A one-node run's commit leaves it to the retention sweep, as every run
// (a store given a RunRetention included): the sweep packs the SUCCEEDED
// runs into one key each with the time to live, their hashes and streams
// gone, and gives the locators their time to live (a run of a thread's,
// in another slot; one that a run stored before runs without a thread
// stopped having one has). Each reads as before, events included; a
// replayed commit is still recognised, and a stale one refused as stale.
func TestRetentionPacksOneNodeRuns(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.store = fence.New(tb.be.Client, &fence.Options{RunRetention: time.Hour})
		rdb, keys := tb.be.Client, tb.store.Keys()
		tb.submit(t, spec("one", node("a")))
		tb.submit(t, spec("two", node("a"), node("b")))
		threaded := spec("threaded", node("a"))
		threaded.Thread = "t-commit-retain"
		tb.submit(t, threaded)
		// A run stored before runs without a thread stopped having a
		// locator (its run hash holds its id).
		tb.submit(t, spec("legacy", node("a")))
		require.NoError(t, rdb.Set(tb.ctx, keys.Locator("legacy"), "legacy", 0).Err())
		require.NoError(t, rdb.HSet(tb.ctx, keys.Run("legacy", "legacy"), "id", "legacy", "thread", "legacy").Err())

		c := tb.claim(t, "one", "a", "w", longTTL)
		require.Equal(t, "SUCCEEDED", tb.commit(t, c, `"r"`).RunStatus)
		tb.commit(t, tb.claim(t, "legacy", "a", "w", longTTL), `1`)
		for _, id := range []string{"a", "b"} {
			tb.commit(t, tb.claim(t, "two", id, "w", longTTL), `1`)
		}
		tc, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "t-commit-retain", Run: "threaded", Node: "a"}, "w", longTTL, grace)
		require.NoError(t, err)
		tb.commit(t, tc, `1`)
		ttl := func(k string) time.Duration {
			t.Helper()
			d, err := rdb.TTL(tb.ctx, k).Result()
			require.NoError(t, err)
			return d
		}
		require.Equal(t, time.Duration(-1), ttl(keys.Run("one", "one")), "the commit leaves the run to the sweep")
		info := tb.getRun(t, "one")
		events := tb.events(t, "one")

		n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, 4, n)
		for _, r := range []struct{ thread, run string }{{"one", "one"}, {"legacy", "legacy"}, {"two", "two"},
			{"t-commit-retain", "threaded"}} {
			gone, err := rdb.Exists(tb.ctx, keys.Run(r.thread, r.run), keys.Events(r.thread, r.run),
				keys.Node(r.thread, r.run, "a")).Result()
			require.NoError(t, err)
			require.Zero(t, gone, "%s: packed in place of its keys", r.run)
			require.Greater(t, ttl(keys.Packed(r.thread, r.run)), 59*time.Minute, r.run)
			require.LessOrEqual(t, ttl(keys.Packed(r.thread, r.run)), time.Hour, r.run)
		}
		locs, err := rdb.Exists(tb.ctx, keys.Locator("one")).Result()
		require.NoError(t, err)
		require.Zero(t, locs, "a run without a thread has no locator")
		require.Greater(t, ttl(keys.Locator("legacy")), 59*time.Minute, "the old locator expires with its run")
		require.Greater(t, ttl(keys.Locator("threaded")), 59*time.Minute, "the sweep gave the locator its time to live")

		require.Equal(t, info, tb.getRun(t, "one"), "a packed run reads as before")
		require.Equal(t, events, tb.events(t, "one"))
		var types []string
		for _, e := range events {
			types = append(types, e.Type)
		}
		require.Equal(t, []string{"submitted", "claimed", "committed", "run_finished"}, types)

		again, err := tb.store.Commit(tb.ctx, c.Lease, []byte(`"other"`), c.Dependents)
		require.NoError(t, err, "a commit replayed after its run was packed")
		require.True(t, again.Replay)
		require.Equal(t, "SUCCEEDED", again.RunStatus)
		stale := c.Lease
		stale.Epoch--
		_, err = tb.store.Commit(tb.ctx, stale, []byte(`"late"`), nil)
		require.ErrorIs(t, err, fence.ErrStaleEpoch, "a late write to a packed run is refused as stale")
		require.Equal(t, info, tb.getRun(t, "one"), "and changes nothing")
		after := tb.events(t, "one")
		require.Len(t, after, len(events)+1, "the refusal is recorded, after the run's events")
		require.Equal(t, events, after[:len(events)])
		last := after[len(events)]
		require.Equal(t, "stale_rejected", last.Type)
		require.Equal(t, "commit", last.Details["op"])
		require.Equal(t, c.Lease.Epoch-1, last.Epoch)
		require.Greater(t, ttl(keys.Events("one", "one")), 59*time.Minute, "the refusal expires with the run")
		page, err := tb.store.Events(tb.ctx, "one", after[1].ID, 10)
		require.NoError(t, err)
		require.Equal(t, after[2:], page)
		follow, err := tb.store.WaitEvents(tb.ctx, "one", after[len(events)-1].ID, 10, 50*time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, after[len(events):], follow)

		n, err = tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Zero(t, n, "each run is packed once")
		var left []string
		for shard := range fence.Shards {
			ids, err := rdb.ZRange(tb.ctx, keys.Finished(shard), 0, -1).Result()
			require.NoError(t, err)
			left = append(left, ids...)
		}
		require.Empty(t, left)
	})
}

// The scripts store no field at its default (no dependencies, no timeout,
// no releases, no retry policy, no previous owner, and until a claim or a
// heartbeat no owner, claim, lease or progress), nor what no reader
// uses, nor a locator for a run without a thread: a run stored before
// that, with all of them written out, is still claimed, committed, read
// and retained as a new one, so a fleet can be upgraded with runs live.
func TestRunsStoredWithTheirDefaultsStillRun(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		rdb, keys := tb.be.Client, tb.store.Keys()
		tb.submit(t, spec("fresh", node("a")))
		h, err := rdb.HGetAll(tb.ctx, keys.Node("fresh", "fresh", "a")).Result()
		require.NoError(t, err)
		for _, f := range []string{"deps", "dependents", "descendants", "timeout_ms", "releases", "retry", "prev_owner",
			"owner", "claim", "lease_until", "progress"} {
			require.NotContains(t, h, f, "a default is not stored")
		}
		for _, f := range []string{"created_at", "updated_at"} {
			require.NotContains(t, h, f, "no reader uses it")
		}

		tb.submit(t, spec("old", node("a"), node("b", "a")))
		old := map[string][]any{
			"a": {"deps", "[]", "descendants", `["b"]`, "dependents", `["b"]`},
			"b": {"deps", `["a"]`, "descendants", "[]", "dependents", "[]"},
		}
		for id, set := range old {
			set = append(set, "timeout_ms", 0, "releases", 0, "retry", "", "prev_owner", "",
				"owner", "", "claim", "", "lease_until", 0, "progress", 0, "created_at", 1, "updated_at", 1)
			require.NoError(t, rdb.HSet(tb.ctx, keys.Node("old", "old", id), set...).Err())
		}
		require.NoError(t, rdb.HSet(tb.ctx, keys.Run("old", "old"), "behind", "", "multitask", "", "updated_at", 1,
			"id", "old", "thread", "old").Err())
		require.NoError(t, rdb.Set(tb.ctx, keys.Locator("old"), "old", 0).Err()) // as every run had then

		a := tb.claim(t, "old", "a", "w", longTTL)
		require.Equal(t, []string{"b"}, a.Dependents)
		require.Zero(t, a.Timeout)
		tb.commit(t, a, `"ra"`)
		b := tb.claim(t, "old", "b", "w", longTTL)
		require.Empty(t, b.Dependents)
		require.Equal(t, "SUCCEEDED", tb.commit(t, b, `"rb"`).RunStatus)
		before := tb.getRun(t, "old")
		require.Equal(t, []string{"a"}, before.Nodes[1].Deps)
		n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, before, tb.getRun(t, "old"), "retained, it reads as before")
		gone := map[string][]string{keys.Run("old", "old"): {"updated_at"},
			keys.Node("old", "old", "a"): {"created_at", "updated_at", "lease_until", "progress"},
			keys.Node("old", "old", "b"): {"created_at", "updated_at", "lease_until", "progress"}}
		loc, err := rdb.TTL(tb.ctx, keys.Locator("old")).Result()
		require.NoError(t, err)
		require.Greater(t, loc, 59*time.Minute, "its locator expires with it")
		for key, fields := range gone {
			h, err := rdb.HGetAll(tb.ctx, key).Result()
			require.NoError(t, err)
			for _, f := range fields {
				require.NotContains(t, h, f, "retention drops what no reader uses from %s", key)
			}
		}
	})
}

// A run that FAILED is packed by the retention like a SUCCEEDED one, every
// field kept: it reads as before; a late write of an earlier attempt is
// refused and recorded; the fail that ended it, resent after a lost
// reply, gets the first answer again; a retry writes it back as its keys
// in the step that re-runs it (events in order, the refusal after them),
// its node's epoch moves on, and the retried run succeeds. Packed again,
// the same retry request is recognised and another is refused. A retry
// refused because the thread moved on leaves the run packed. On miniredis
// and a real redis-server.
func TestRetentionPacksFailedRunsAndRetryWritesThemBack(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		rdb, keys := tb.be.Client, tb.store.Keys()
		once := node("b", "a")
		once.MaxAttempts = 2
		tb.submit(t, spec("pf", node("a"), once, node("c")))
		tb.commit(t, tb.claim(t, "pf", "a", "w1", longTTL), `{"a":1}`)
		first := tb.claim(t, "pf", "b", "w1", longTTL)
		end, err := tb.store.Fail(tb.ctx, first.Lease, fence.Failure{Err: "flaky"}, first.Descendants)
		require.NoError(t, err)
		require.Equal(t, fence.Retrying, end.Outcome)
		tb.commit(t, tb.claim(t, "pf", "c", "w1", longTTL), `{"c":3}`)
		tb.advance(t, time.Second) // past the retry's delay
		last := tb.claim(t, "pf", "b", "w2", longTTL)
		end, err = tb.store.Fail(tb.ctx, last.Lease, fence.Failure{Err: "boom:\n\x00 ünïcödé"}, last.Descendants)
		require.NoError(t, err)
		require.Equal(t, "FAILED", end.RunStatus)
		info, events := tb.getRun(t, "pf"), tb.events(t, "pf")

		n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		gone, err := rdb.Exists(tb.ctx, keys.Run("pf", "pf"), keys.Events("pf", "pf"), keys.Node("pf", "pf", "b")).Result()
		require.NoError(t, err)
		require.Zero(t, gone, "packed in place of its keys")
		require.Equal(t, info, tb.getRun(t, "pf"), "a packed FAILED run reads as before")
		require.Equal(t, events, tb.events(t, "pf"))

		_, err = tb.store.Heartbeat(tb.ctx, first.Lease, time.Minute, 0)
		require.ErrorIs(t, err, fence.ErrStaleEpoch, "the first attempt's late write")
		again, err := tb.store.Fail(tb.ctx, last.Lease, fence.Failure{Err: "boom:\n\x00 ünïcödé"}, last.Descendants)
		require.NoError(t, err, "the fail that ended the run, resent after its run was packed")
		require.Equal(t, end, again)

		retried, err := tb.store.Retry(tb.ctx, "pf", "req-1", "test")
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, retried.Ready)
		require.False(t, retried.Replay)
		packed, err := rdb.Exists(tb.ctx, keys.Packed("pf", "pf")).Result()
		require.NoError(t, err)
		require.Zero(t, packed, "written back as its keys")
		after := tb.events(t, "pf")
		require.Equal(t, events, after[:len(events)], "the packed events, in order, under their ids")
		var types []string
		for _, e := range after[len(events):] {
			types = append(types, e.Type)
		}
		require.Equal(t, []string{"stale_rejected", "retried", "run_retried"}, types)
		b := tb.nodeInfo(t, "pf", "b")
		require.Equal(t, "READY", b.State)
		require.Equal(t, last.Lease.Epoch+1, b.Epoch, "fenced as by a claim")
		require.JSONEq(t, `{"a":1}`, string(tb.nodeInfo(t, "pf", "a").Result), "a kept its result")

		replay, err := tb.store.Retry(tb.ctx, "pf", "req-1", "test")
		require.NoError(t, err)
		require.True(t, replay.Replay)
		require.Equal(t, "SUCCEEDED", tb.commit(t, tb.claim(t, "pf", "b", "w3", longTTL), `{"b":2}`).RunStatus)
		n, err = tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		replay, err = tb.store.Retry(tb.ctx, "pf", "req-1", "test")
		require.NoError(t, err, "the same request, once the run was packed again")
		require.True(t, replay.Replay)
		require.Equal(t, "SUCCEEDED", replay.Status)
		_, err = tb.store.Retry(tb.ctx, "pf", "req-2", "test")
		require.ErrorIs(t, err, fence.ErrNotRetryable)

		// A run of a thread that moved on stays packed when refused.
		for _, r := range []string{"t1", "t2"} {
			a := spec(r, node("a"))
			a.Thread, a.Multitask = "pf-chat", "enqueue"
			tb.submit(t, a)
		}
		tc, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "pf-chat", Run: "t1", Node: "a"}, "w", longTTL, grace)
		require.NoError(t, err)
		_, err = tb.store.Fail(tb.ctx, tc.Lease, fence.Failure{Err: "boom", Final: true}, nil)
		require.NoError(t, err)
		_, err = tb.store.Promote(tb.ctx, "pf-chat", "w")
		require.NoError(t, err)
		_, err = tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		_, err = tb.store.Retry(tb.ctx, "t1", "req-3", "test")
		require.ErrorIs(t, err, fence.ErrNotActiveRun)
		packed, err = rdb.Exists(tb.ctx, keys.Packed("pf-chat", "t1"), keys.Run("pf-chat", "t1")).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), packed, "still packed, and only packed")
		require.Equal(t, "FAILED", tb.getRun(t, "t1").Status)
	})
}
