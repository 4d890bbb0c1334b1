package fence_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A promotion that comes after the ended active run was packed, or its
// keys expired, reads it as submit and retry do and never writes to it:
// the packed run reads as before, with no run hash or stream of its own
// again (which would have no expiry and no node list), and an expired
// one stays gone; a rollback queued behind it still removes what it
// wrote to the thread's checkpoints, and says so on its own stream.
func TestPromoteAfterTheActiveRunWasPacked(t *testing.T) {
	t.Parallel()
	forEachBackend(t, checkPromoteAfterTheActiveRunWasPacked)
}

func checkPromoteAfterTheActiveRunWasPacked(t *testing.T, tb *testBundle) {
	rdb, keys := tb.be.Client, tb.store.Keys()
	submit := func(thread, run, strategy string) string {
		a := spec(run, node("n"))
		a.Thread, a.Multitask = thread, strategy
		res, err := tb.store.Submit(tb.ctx, a)
		require.NoError(t, err)
		return res.Status
	}
	save := func(thread, run, id string) *fence.Claimed {
		c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: thread, Run: run, Node: "n"}, "w", longTTL, grace)
		require.NoError(t, err)
		_, err = tb.store.SaveCheckpoint(tb.ctx, c.Lease, fence.CheckpointWrite{NS: "ns", ID: id,
			Data: json.RawMessage(`{"by":"` + run + `"}`)})
		require.NoError(t, err)
		return c
	}
	// Two threads: in "packed" the ended run failed and the
	// retention packs it; in "expired" it was cancelled by the
	// rollback and its keys expire.
	setUp := func(thread string) {
		submit(thread, thread+"-r0", "enqueue")
		c0 := save(thread, thread+"-r0", "before")
		_, err := tb.store.Commit(tb.ctx, c0.Lease, []byte(`"ok"`), nil)
		require.NoError(t, err)
		require.Equal(t, "RUNNING", submit(thread, thread+"-r1", "enqueue"))
		c1 := save(thread, thread+"-r1", "r1-a")
		if thread == "packed" {
			require.Equal(t, "QUEUED", submit(thread, thread+"-later", "enqueue"))
			_, err = tb.store.Fail(tb.ctx, c1.Lease, fence.Failure{Err: "boom", Final: true}, nil)
			require.NoError(t, err)
		} else {
			require.Equal(t, "QUEUED", submit(thread, thread+"-rb", "rollback"))
			_, err = tb.store.Fail(tb.ctx, c1.Lease, fence.Failure{Err: "cancelled", Final: true}, nil)
			require.NoError(t, err)
		}
	}
	// The retention runs before anyone promotes: it packs the failed
	// run, and gives the cancelled one's keys a time to live.
	setUp("packed")
	packedRun := tb.getRun(t, "packed-r1")
	require.Equal(t, "FAILED", packedRun.Status)
	packedEvents := tb.events(t, "packed-r1")
	_, err := tb.store.RetainFinished(tb.ctx, time.Hour, 100)
	require.NoError(t, err)
	require.Equal(t, int64(1), rdb.Exists(tb.ctx, keys.Packed("packed", "packed-r1")).Val())
	setUp("expired")
	_, err = tb.store.RetainFinished(tb.ctx, time.Second, 100)
	require.NoError(t, err)
	if tb.be.Mini != nil {
		tb.be.Mini.FastForward(2 * time.Second)
	} else {
		tb.advance(t, 1500*time.Millisecond)
	}
	for _, run := range []string{"packed-r1", "expired-r1"} {
		thread := run[:len(run)-3]
		n, err := rdb.Exists(tb.ctx, keys.Run(thread, run), keys.Events(thread, run)).Result()
		require.NoError(t, err)
		require.Zero(t, n, "%s is packed or expired", run)
	}

	for _, thread := range []string{"packed", "expired"} {
		p, err := tb.store.Promote(tb.ctx, thread, "w")
		require.NoError(t, err)
		require.NotNil(t, p)
		run := thread + "-r1"
		n, err := rdb.Exists(tb.ctx, keys.Run(thread, run), keys.Events(thread, run)).Result()
		require.NoError(t, err)
		require.Zero(t, n, "no new run hash or stream for %s", run)
		if thread == "packed" {
			require.Equal(t, "packed-later", p.Run)
			continue
		}
		require.Equal(t, thread+"-rb", p.Run)
		list, _, err := tb.store.Checkpoints(tb.ctx, thread, "ns", 0, 10)
		require.NoError(t, err)
		require.Len(t, list, 1, "r1's checkpoint is rolled back")
		require.Equal(t, "before", list[0].ID)
		var rolled []fence.Event
		for _, e := range tb.events(t, thread+"-rb") {
			if e.Type == "rolled_back" {
				rolled = append(rolled, e)
			}
		}
		require.Len(t, rolled, 1, "the rollback is recorded on the run that asked for it")
		require.Equal(t, run, rolled[0].Details["of"])
	}
	require.Equal(t, packedRun, tb.getRun(t, "packed-r1"), "the packed run reads as before")
	require.Equal(t, packedEvents, tb.events(t, "packed-r1"))
	_, err = tb.store.GetRun(tb.ctx, "expired-r1")
	require.ErrorIs(t, err, fence.ErrNotFound, "an expired run stays gone")
}

// A thread's active run that ended and was packed by the retention sweep
// still says how it ended: the Agent Server API reads a thread's pending
// interrupts from it, and before, a resume sent a sweep after the
// interrupt found no status and was refused (found by the side-by-side
// test of the official clients).
func TestThreadShowsItsPackedRunsStatus(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		a := spec("asked", node("n"))
		a.Thread = "chat"
		_, err := tb.store.Submit(tb.ctx, a)
		require.NoError(t, err)
		c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: "asked", Node: "n"}, "w", longTTL, grace)
		require.NoError(t, err)
		_, err = tb.store.Commit(tb.ctx, c.Lease, []byte(`{"interrupts": [{"id": "i1"}]}`), nil)
		require.NoError(t, err)
		_, err = tb.store.RetainFinished(tb.ctx, time.Hour, 100)
		require.NoError(t, err)
		require.Equal(t, int64(1), tb.be.Client.Exists(tb.ctx, tb.store.Keys().Packed("chat", "asked")).Val(), "packed")
		th, err := tb.store.Thread(tb.ctx, "chat")
		require.NoError(t, err)
		require.Equal(t, "asked", th.Active)
		require.Equal(t, "SUCCEEDED", th.ActiveStatus)
	})
}
