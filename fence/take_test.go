package fence_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

// sameShard returns n run ids whose keys share one shard, as one-node runs
// a drain meets in the same shard.
func sameShard(prefix string, n int) []string {
	var out []string
	want := fence.ShardOf(prefix + "0")
	for i := 0; len(out) < n; i++ {
		if id := prefix + strconv.Itoa(i); fence.ShardOf(id) == want {
			out = append(out, id)
		}
	}
	return out
}

// otherShard returns a run id whose shard is not run's.
func otherShard(prefix, run string) string {
	for i := 0; ; i++ {
		if id := prefix + strconv.Itoa(i); fence.ShardOf(id) != fence.ShardOf(run) {
			return id
		}
	}
}

// takeAll continues or takes any noop node on the default queue.
func takeAll() fence.Continue {
	c := serveAll()
	c.Take = "default"
	return c
}

// deliver puts run's node "a" on the default queue, as submit does.
func deliver(t *testing.T, tb *testBundle, run string) {
	t.Helper()
	require.NoError(t, delivery.New(tb.be.Client).Enqueue(tb.ctx, ref(run, "a"), "default", 1, time.Time{}))
}

// A commit that continues with no dependent takes the queue's next node of
// its shard for its caller, in the same step: the node is RUNNING under a
// new epoch and claim, its delivery is gone from the queue and counted as
// processed, and a retry of the commit after a lost reply hands the same
// node back.
func TestCommitTakesTheQueuesNextNode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		runs := sameShard("take", 3)
		for _, r := range runs {
			tb.submit(t, spec(r, node("a")))
		}
		deliver(t, tb, runs[1])
		deliver(t, tb, runs[2])
		insp := asynq.NewInspectorFromRedisClient(tb.be.Client)

		first := tb.claim(t, runs[0], "a", "w", longTTL)
		cont := takeAll()
		res, err := tb.store.CommitContinue(tb.ctx, first.Lease, []byte(`1`), nil, cont)
		require.NoError(t, err)
		require.Equal(t, "SUCCEEDED", res.RunStatus)
		require.True(t, res.Taken)
		next := res.Next
		require.NotNil(t, next)
		require.Equal(t, []string{runs[1], runs[1], "a"}, []string{next.Thread, next.Run, next.Node}, "the oldest due node first")
		require.Equal(t, int64(1), next.Epoch)
		require.Equal(t, int64(1), next.Attempt)
		require.Equal(t, cont.ClaimID, next.ClaimID)
		require.Equal(t, "RUNNING", tb.nodeInfo(t, runs[1], "a").State)
		require.Len(t, ofType(tb.events(t, runs[1]), "claimed"), 1, "the take is a claim in the run's history")

		_, err = insp.GetTaskInfo("default", delivery.TaskID(ref(runs[1], "a"), 1))
		require.ErrorIs(t, err, asynq.ErrTaskNotFound, "its delivery left the queue")
		qi, err := insp.GetQueueInfo("default")
		require.NoError(t, err)
		require.Equal(t, 1, qi.Pending, "the other delivery waits")
		require.Equal(t, 1, qi.Processed, "Asynq counts the taken delivery as processed")

		_, err = tb.store.Claim(tb.ctx, ref(runs[1], "a"), "other", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeBusy, "the taken node holds a real lease")

		// The reply was lost: the retry hands the same node back.
		again, err := tb.store.CommitContinue(tb.ctx, first.Lease, []byte(`1`), nil, cont)
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.True(t, again.Taken)
		require.Equal(t, next.Run, again.Next.Run)
		require.Equal(t, next.Epoch, again.Next.Epoch)
		qi, err = insp.GetQueueInfo("default")
		require.NoError(t, err)
		require.Equal(t, 1, qi.Pending, "a replay takes nothing more")

		// The taken node is fenced as any: its commit takes the last one.
		res, err = tb.store.CommitContinue(tb.ctx, next.Lease, []byte(`2`), nil, takeAll())
		require.NoError(t, err)
		require.Equal(t, runs[2], res.Next.Run)
		res, err = tb.store.CommitContinue(tb.ctx, res.Next.Lease, []byte(`3`), nil, takeAll())
		require.NoError(t, err)
		require.Nil(t, res.Next, "nothing left to take")
		for _, r := range runs {
			require.Equal(t, "SUCCEEDED", tb.getRun(t, r).Status)
		}
		qi, err = insp.GetQueueInfo("default")
		require.NoError(t, err)
		require.Equal(t, 0, qi.Pending)
		require.Equal(t, 2, qi.Processed)
	})
}

// A commit takes nothing it should leave to its delivery: from a paused
// queue, a node of a kind the caller does not run, a node of another shard,
// or a node whose delivery is not waiting in the queue (dequeued already).
func TestCommitTakesOnlyWhatItMay(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		insp := asynq.NewInspectorFromRedisClient(tb.be.Client)
		runs := sameShard("only", 6)
		for _, r := range runs[:5] {
			tb.submit(t, spec(r, node("a")))
		}
		commitTaking := func(run string, cont fence.Continue) fence.Committed {
			t.Helper()
			c := tb.claim(t, run, "a", "w", longTTL)
			res, err := tb.store.CommitContinue(tb.ctx, c.Lease, []byte(`1`), nil, cont)
			require.NoError(t, err)
			return res
		}

		// runs[1]'s delivery waits, but the queue is paused.
		deliver(t, tb, runs[1])
		require.NoError(t, insp.PauseQueue("default"))
		res := commitTaking(runs[0], takeAll())
		require.Nil(t, res.Next, "nothing is taken from a paused queue")
		require.NoError(t, insp.UnpauseQueue("default"))

		// A caller that does not run the node's kind.
		cont := takeAll()
		cont.Kinds = []string{"exec"}
		res = commitTaking(runs[2], cont)
		require.Nil(t, res.Next, "a kind the caller does not run is left to its delivery")

		// Without Take, a commit takes nothing.
		res = commitTaking(runs[3], serveAll())
		require.Nil(t, res.Next)
		require.Equal(t, "READY", tb.nodeInfo(t, runs[1], "a").State)

		// A node of another shard is not taken, though its delivery is
		// the next in the queue.
		far := otherShard("far", runs[0])
		tb.submit(t, spec(far, node("a")))
		q := asynq.NewInspectorFromRedisClient(tb.be.Client)
		require.NoError(t, q.DeleteTask("default", delivery.TaskID(ref(runs[1], "a"), 1)))
		deliver(t, tb, far)
		res = commitTaking(runs[4], takeAll())
		require.Nil(t, res.Next, "another shard's node is not taken")
		require.Equal(t, "READY", tb.nodeInfo(t, far, "a").State)

		// A READY node whose delivery is not in the queue (a worker has
		// dequeued it) is left to that delivery.
		tb.submit(t, spec(runs[5], node("a")))
		c := tb.claim(t, runs[1], "a", "w", longTTL) // runs[1] has no delivery now
		res, err := tb.store.CommitContinue(tb.ctx, c.Lease, []byte(`1`), nil, takeAll())
		require.NoError(t, err)
		require.Nil(t, res.Next, "a node without a waiting delivery is not taken")
		require.Equal(t, "READY", tb.nodeInfo(t, runs[5], "a").State)
	})
}

// A commit retried after a lost reply hands back the node its first try
// took even when the retention packed the committed run in between: the
// packed node keeps the pointer, and the taken node is claimed again under
// the same claim, as a retried claim is. Once another worker has taken the
// node over, the retry hands back nothing.
func TestCommitReplayAfterPackingHandsBackTheTakenNode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		runs := sameShard("packed", 3)
		for _, r := range runs {
			tb.submit(t, spec(r, node("a")))
		}
		deliver(t, tb, runs[1])
		first := tb.claim(t, runs[0], "a", "w", longTTL)
		cont := takeAll()
		cont.TTL = shortTTL
		res, err := tb.store.CommitContinue(tb.ctx, first.Lease, []byte(`1`), nil, cont)
		require.NoError(t, err)
		require.Equal(t, runs[1], res.Next.Run)
		n, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the committed run is packed")

		again, err := tb.store.CommitContinue(tb.ctx, first.Lease, []byte(`1`), nil, cont)
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.True(t, again.Taken)
		require.Equal(t, runs[1], again.Next.Run)
		require.Equal(t, res.Next.Epoch, again.Next.Epoch, "the same claim, not a new one")
		require.Equal(t, cont.ClaimID, again.Next.ClaimID)
		require.Len(t, ofType(tb.events(t, runs[1]), "claimed"), 1)

		// Taken over since: nothing to hand back.
		tb.advance(t, pastExpiry)
		_, err = tb.store.Claim(tb.ctx, ref(runs[1], "a"), "other", longTTL, grace)
		require.NoError(t, err)
		again, err = tb.store.CommitContinue(tb.ctx, first.Lease, []byte(`1`), nil, cont)
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.Nil(t, again.Next)
	})
}
