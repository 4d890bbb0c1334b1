package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// TestSubmitIdempotent: resubmitting a run (a client retry) is a no-op; a
// different run under the same id is refused.
func TestSubmitIdempotent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		args := spec("idem", node("a"), node("b", "a"))
		res := tb.submit(t, args)
		require.Equal(t, "idem", res.Thread)
		require.Equal(t, []string{"a"}, res.Ready)
		c := tb.claim(t, "idem", "a", "w", longTTL)
		before := tb.getRun(t, "idem")
		evs := len(tb.events(t, "idem"))

		again, err := tb.store.Submit(tb.ctx, args)
		require.NoError(t, err)
		require.False(t, again.Created)
		require.Equal(t, "RUNNING", again.Status)
		require.Empty(t, again.Ready, "nothing to enqueue again")
		require.Equal(t, before, tb.getRun(t, "idem"), "the run is unchanged")
		require.Len(t, tb.events(t, "idem"), evs)

		other := spec("idem", node("a"), node("b", "a"), node("x"))
		other.Digest = "another-digest"
		_, err = tb.store.Submit(tb.ctx, other)
		require.ErrorIs(t, err, fence.ErrRunConflict)

		moved := args
		moved.Thread = "another-thread"
		_, err = tb.store.Submit(tb.ctx, moved)
		require.ErrorIs(t, err, fence.ErrRunConflict)

		require.Equal(t, before, tb.getRun(t, "idem"))

		// The other way round: a run of a thread holds the id, and the
		// submit script of a run without a thread refuses it.
		held := spec("held", node("a"))
		held.Thread = "t-held"
		tb.submit(t, held)
		_, err = tb.store.Submit(tb.ctx, spec("held", node("a")))
		require.ErrorIs(t, err, fence.ErrRunConflict)
		require.ErrorContains(t, err, `exists under "t-held"`)
		thread, err := tb.store.Locate(tb.ctx, "held")
		require.NoError(t, err)
		require.Equal(t, "t-held", thread)

		tb.commit(t, c, `1`) // the first submit's node is intact
		require.Equal(t, "READY", tb.nodeInfo(t, "idem", "b").State)
	})
}

// TestEventsPaging: events are read in order, after a stream id, a page at
// a time.
func TestEventsPaging(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("ev", node("a")))
		tb.commit(t, tb.claim(t, "ev", "a", "w", longTTL), `1`)
		all := tb.events(t, "ev")
		types := make([]string, len(all))
		for i, e := range all {
			types[i] = e.Type
		}
		require.Equal(t, []string{"submitted", "claimed", "committed", "run_finished"}, types)
		require.Equal(t, "w", all[1].Worker)
		require.Equal(t, int64(1), all[1].Epoch)
		require.Equal(t, "1", all[1].Details["attempt"])
		require.False(t, all[1].At.IsZero())

		page, err := tb.store.Events(tb.ctx, "ev", "", 2)
		require.NoError(t, err)
		require.Equal(t, all[:2], page)
		page, err = tb.store.Events(tb.ctx, "ev", page[1].ID, 0)
		require.NoError(t, err)
		require.Equal(t, all[2:], page)
		_, err = tb.store.Events(tb.ctx, "missing", "", 0)
		require.ErrorIs(t, err, fence.ErrNotFound)
	})
}

// TestSubmitThread: a run submitted under a thread lives under it.
func TestSubmitThread(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		args := spec("r1", node("a"))
		args.Thread = "chat-7"
		res := tb.submit(t, args)
		require.Equal(t, "chat-7", res.Thread)
		thread, err := tb.store.Locate(tb.ctx, "r1")
		require.NoError(t, err)
		require.Equal(t, "chat-7", thread)
		require.Equal(t, "chat-7", tb.getRun(t, "r1").Thread)

		c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: "chat-7", Run: "r1", Node: "a"}, "w", longTTL, grace)
		require.NoError(t, err)
		_, err = tb.store.Commit(tb.ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, "SUCCEEDED", tb.getRun(t, "r1").Status)

		_, err = tb.store.Claim(tb.ctx, ref("r1", "a"), "w", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNotFound, "keys are under the thread's tag")
		_, err = tb.store.GetRun(tb.ctx, "unknown")
		require.ErrorIs(t, err, fence.ErrNotFound)
	})
}

// A thread runs one run at a time: a second run is rejected while the
// first is active and accepted once it has finished.
func TestThreadRejectsASecondActiveRun(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b *testBundle) {
		ctx := b.ctx
		one := fence.SubmitArgs{Run: "turn-1", Thread: "chat-7", Digest: "d1",
			Nodes: []fence.NodeSpec{{ID: "a", Kind: "noop", Queue: "default", Input: "null",
				Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}}
		res, err := b.store.Submit(ctx, one)
		require.NoError(t, err)
		require.True(t, res.Created)
		require.Equal(t, "chat-7", res.Thread)

		two := one
		two.Run, two.Digest = "turn-2", "d2"
		_, err = b.store.Submit(ctx, two)
		require.ErrorIs(t, err, fence.ErrThreadBusy)
		require.Contains(t, err.Error(), "turn-1")
		_, err = b.store.GetRun(ctx, "turn-2")
		require.ErrorIs(t, err, fence.ErrNotFound, "a rejected run is not stored")

		// Resubmitting the active run itself is still idempotent.
		again, err := b.store.Submit(ctx, one)
		require.NoError(t, err)
		require.False(t, again.Created)

		c, err := b.store.Claim(ctx, fence.NodeRef{Thread: "chat-7", Run: "turn-1", Node: "a"}, "w1", time.Minute, time.Second)
		require.NoError(t, err)
		_, err = b.store.Commit(ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)

		res, err = b.store.Submit(ctx, two)
		require.NoError(t, err, "the thread is free once its run finished")
		require.True(t, res.Created)
	})
}
