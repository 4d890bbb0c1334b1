package fence_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// threadRun submits a one-node run of thread "chat" under strategy.
func (tb *testBundle) threadRun(t *testing.T, run, strategy string) fence.SubmitResult {
	t.Helper()
	a := spec(run, node("n"))
	a.Thread, a.Multitask = "chat", strategy
	res, err := tb.store.Submit(tb.ctx, a)
	require.NoError(t, err, "submit %s", run)
	return res
}

// finish claims and commits the run's node n.
func (tb *testBundle) finish(t *testing.T, run string) fence.Committed {
	t.Helper()
	c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: run, Node: "n"}, "w", longTTL, grace)
	require.NoError(t, err, "claim %s", run)
	res, err := tb.store.Commit(tb.ctx, c.Lease, []byte(`"ok"`), nil)
	require.NoError(t, err)
	again, err := tb.store.Commit(tb.ctx, c.Lease, []byte(`"ok"`), nil)
	require.NoError(t, err)
	require.True(t, again.Replay)
	require.Equal(t, res.ThreadQueued, again.ThreadQueued, "a replayed commit answers as the first")
	return res
}

// "enqueue" queues runs FIFO behind the active one; each starts (root nodes
// READY) when the one before it ends, and not before.
func TestMultitaskEnqueue(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		require.Equal(t, "RUNNING", tb.threadRun(t, "r1", "enqueue").Status)
		second := tb.threadRun(t, "r2", "enqueue")
		require.Equal(t, "QUEUED", second.Status)
		require.Equal(t, "r1", second.Behind)
		require.Empty(t, second.Ready)
		require.Equal(t, "QUEUED", tb.threadRun(t, "r3", "enqueue").Status)
		require.Equal(t, "r1", tb.getRun(t, "r2").Behind)
		_, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: "r2", Node: "n"}, "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeBlocked, "a queued run's nodes wait")

		p, err := tb.store.Promote(tb.ctx, "chat", "w")
		require.NoError(t, err)
		require.Nil(t, p, "nothing starts while r1 runs")
		_, err = tb.store.Submit(tb.ctx, func() fence.SubmitArgs {
			a := spec("r4", node("n"))
			a.Thread, a.Multitask = "chat", "reject"
			return a
		}())
		require.ErrorIs(t, err, fence.ErrThreadBusy)

		for _, next := range []string{"r2", "r3"} {
			ended := tb.finish(t, map[string]string{"r2": "r1", "r3": "r2"}[next])
			require.True(t, ended.ThreadQueued, "the commit says a run waits to start")
			p, err := tb.store.Promote(tb.ctx, "chat", "w")
			require.NoError(t, err)
			require.Equal(t, next, p.Run)
			require.Equal(t, []string{"n"}, p.Ready)
			require.Equal(t, "RUNNING", tb.getRun(t, next).Status)
			again, err := tb.store.Promote(tb.ctx, "chat", "w")
			require.NoError(t, err)
			require.Nil(t, again, "promoting twice starts nothing more")
		}
		info, err := tb.store.Thread(tb.ctx, "chat")
		require.NoError(t, err)
		require.Equal(t, "r3", info.Active)
		require.Empty(t, info.Queued)
		require.False(t, tb.finish(t, "r3").ThreadQueued, "nothing waits: no Promote needed")
	})
}

// "interrupt" and "rollback" queue at the front; a run cancelled while
// queued is skipped; "rollback" deletes the checkpoints the run it follows
// wrote, leaving exactly those that existed before it.
func TestMultitaskInterruptAndRollback(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		save := func(run, id string) {
			c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: run, Node: "n"}, "w", longTTL, grace)
			require.NoError(t, err)
			_, err = tb.store.SaveCheckpoint(tb.ctx, c.Lease, fence.CheckpointWrite{NS: "chat", ID: id,
				Data: json.RawMessage(`{"by":"` + run + `"}`)})
			require.NoError(t, err)
			_, err = tb.store.Commit(tb.ctx, c.Lease, []byte(`"ok"`), nil)
			require.NoError(t, err)
		}
		tb.threadRun(t, "r0", "enqueue")
		save("r0", "before")
		require.Equal(t, "RUNNING", tb.threadRun(t, "r1", "enqueue").Status, "an idle thread starts a run at once")

		// r1 runs and saves; then a later enqueue, an interrupt and a
		// rollback arrive. The rollback goes first, then the interrupt.
		c1, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: "r1", Node: "n"}, "w", longTTL, grace)
		require.NoError(t, err)
		for _, id := range []string{"r1-a", "r1-b"} {
			_, err = tb.store.SaveCheckpoint(tb.ctx, c1.Lease, fence.CheckpointWrite{NS: "chat", ID: id, Data: json.RawMessage(`1`)})
			require.NoError(t, err)
		}
		tb.threadRun(t, "later", "enqueue")
		require.Equal(t, "QUEUED", tb.threadRun(t, "int", "interrupt").Status)
		tb.threadRun(t, "gone", "enqueue")
		require.Equal(t, "QUEUED", tb.threadRun(t, "rb", "rollback").Status)
		info, err := tb.store.Thread(tb.ctx, "chat")
		require.NoError(t, err)
		require.Equal(t, []string{"rb", "int", "later", "gone"}, info.Queued)

		_, err = tb.store.Cancel(tb.ctx, "gone", "changed my mind", "t")
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", tb.getRun(t, "gone").Status, "a queued run cancels at once")

		// The caller of a rollback cancels the active run; its node stops.
		_, err = tb.store.Cancel(tb.ctx, "r1", "rolled back", "t")
		require.NoError(t, err)
		_, err = tb.store.DeleteCheckpoints(tb.ctx, "chat")
		require.ErrorIs(t, err, fence.ErrThreadBusy, "r1 is still the active run")
		_, err = tb.store.Fail(tb.ctx, c1.Lease, fence.Failure{Err: "cancelled", Final: true}, nil)
		require.NoError(t, err)
		require.Equal(t, "CANCELLED", tb.getRun(t, "r1").Status)

		p, err := tb.store.Promote(tb.ctx, "chat", "w")
		require.NoError(t, err)
		require.Equal(t, "rb", p.Run)
		list, _, err := tb.store.Checkpoints(tb.ctx, "chat", "chat", 0, 10)
		require.NoError(t, err)
		require.Len(t, list, 1, "r1's checkpoints are gone")
		require.Equal(t, "before", list[0].ID)

		for _, next := range []string{"int", "later"} {
			tb.finish(t, p.Run)
			p, err = tb.store.Promote(tb.ctx, "chat", "w")
			require.NoError(t, err)
			require.Equal(t, next, p.Run)
		}
		tb.finish(t, "later")
		p, err = tb.store.Promote(tb.ctx, "chat", "w")
		require.NoError(t, err)
		require.Nil(t, p, "the cancelled run was skipped; the queue is empty")
		list, _, err = tb.store.Checkpoints(tb.ctx, "chat", "chat", 0, 10)
		require.NoError(t, err)
		require.Len(t, list, 1, "an interrupt keeps checkpoints")
	})
}

// A checkpoint from a run that is not its thread's active run is refused.
// The active run changes only once its nodes are terminal, so a RUNNING
// node of a non-active run means the thread moved on under it; the store
// refuses it all the same (defence in depth).
func TestCheckpointFromANonActiveRun(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.threadRun(t, "old", "enqueue")
		c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat", Run: "old", Node: "n"}, "w", longTTL, grace)
		require.NoError(t, err)
		require.NoError(t, tb.be.Client.Set(tb.ctx, tb.store.Keys().Active("chat"), "new", 0).Err())
		_, err = tb.store.SaveCheckpoint(tb.ctx, c.Lease, fence.CheckpointWrite{NS: "x", ID: "a", Data: json.RawMessage(`1`)})
		require.ErrorIs(t, err, fence.ErrNotActiveRun)
		require.True(t, fence.IsFenced(err))
		_, err = tb.store.LatestCheckpoint(tb.ctx, "chat", "x")
		require.ErrorIs(t, err, fence.ErrNoCheckpoint)
	})
}

// A run of a thread submitted to a Redis that forgot its scripts (a
// restart): the pipeline that claims the run id meets NOSCRIPT, loads
// locator.lua and goes again; the run is stored once, under its thread.
func TestThreadSubmitAfterScriptFlush(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		require.NoError(t, tb.be.Client.ScriptFlush(tb.ctx).Err())
		res := tb.threadRun(t, "flushed", "enqueue")
		require.Equal(t, "RUNNING", res.Status)
		require.Equal(t, []string{"n"}, res.Ready)
		require.Equal(t, "chat", tb.getRun(t, "flushed").Thread)
	})
}
