package fence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A resume resent after its reply was lost is a Replay that still names
// the node's queue and attempt while the node is READY, so the caller
// delivers it; once the node runs again, a Replay has nothing to deliver.
func TestResumeReplayStillDeliversAReadyNode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("w1", node("ask")))
		c := tb.claim(t, "w1", "ask", "w", longTTL)
		p, err := tb.store.Park(tb.ctx, c.Lease, fence.Wait{Request: []byte(`1`)})
		require.NoError(t, err)
		first, err := tb.store.Resume(tb.ctx, "w1", "ask", p.WaitID, []byte(`true`), "t")
		require.NoError(t, err)
		require.False(t, first.Replay)
		again, err := tb.store.Resume(tb.ctx, "w1", "ask", p.WaitID, []byte(`true`), "t")
		require.NoError(t, err)
		require.True(t, again.Replay)
		require.Equal(t, first.Queue, again.Queue)
		require.Equal(t, first.Attempt, again.Attempt)
		next := tb.claim(t, "w1", "ask", "w", longTTL)
		require.NotNil(t, next.Resume)
		late, err := tb.store.Resume(tb.ctx, "w1", "ask", p.WaitID, []byte(`true`), "t")
		require.NoError(t, err)
		require.True(t, late.Replay)
		require.Empty(t, late.Queue, "the node runs: nothing to deliver")
	})
}
