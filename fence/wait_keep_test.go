package fence_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// passTime moves both of Redis's clocks by d: TIME (leases, waits) and,
// on miniredis, key expiry.
func (tb *testBundle) passTime(t *testing.T, d time.Duration) {
	t.Helper()
	tb.advance(t, d)
	if tb.be.Mini != nil {
		tb.be.Mini.FastForward(d)
	}
}

// A parked node's thread keeps its state for as long as the node waits,
// however long past the thread's retention, while a sweeper runs: the
// resumed attempt finds the checkpoint it parked with. Once the wait
// ends otherwise (a cancel), the state expires a retention later, as any
// thread's: nothing is left without an expiry.
func TestParkKeepsTheThreadsState(t *testing.T) {
	t.Parallel()
	forEachBackend(t, checkParkKeepsTheThreadsState)
}

func checkParkKeepsTheThreadsState(t *testing.T, tb *testBundle) {
	const retention = 3 * time.Second
	tb.store = fence.New(tb.be.Client, &fence.Options{ThreadRetention: retention})
	rdb, keys := tb.be.Client, tb.store.Keys()
	for _, run := range []string{"kept", "dropped"} {
		a := spec(run, node("ask"))
		a.Thread = run + "-chat"
		tb.submit(t, a)
		c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: a.Thread, Run: run, Node: "ask"}, "w1", longTTL, grace)
		require.NoError(t, err)
		_, err = tb.store.SaveCheckpoint(tb.ctx, c.Lease, fence.CheckpointWrite{NS: "graph", ID: "cp-1",
			Data: json.RawMessage(`{"messages":["hi"]}`)})
		require.NoError(t, err)
		_, err = tb.store.Park(tb.ctx, c.Lease, fence.Wait{Request: []byte(`{"ask":"go on?"}`)})
		require.NoError(t, err)
	}
	_, err := tb.store.Cancel(tb.ctx, "dropped", "no", "t")
	require.NoError(t, err)

	// More than a retention passes, with a sweep every 250 ms.
	for range 14 {
		tb.passTime(t, 250*time.Millisecond)
		_, err := tb.store.TimeOutWaits(tb.ctx, "sweeper", 100)
		require.NoError(t, err)
	}
	list, _, err := tb.store.Checkpoints(tb.ctx, "kept-chat", "graph", 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 1, "the state the node parked with")
	require.Equal(t, "cp-1", list[0].ID)
	ttl := rdb.PTTL(tb.ctx, keys.Checkpoints("kept-chat")).Val()
	require.Positive(t, ttl, "still under a time to live")
	require.LessOrEqual(t, ttl, retention)

	res, err := tb.store.Resume(tb.ctx, "kept", "ask", "", []byte(`true`), "alice")
	require.NoError(t, err)
	c, err := tb.store.Claim(tb.ctx, fence.NodeRef{Thread: res.Thread, Run: "kept", Node: "ask"}, "w2", longTTL, grace)
	require.NoError(t, err)
	require.NotNil(t, c.Resume)

	// The cancelled wait's state expires a retention after its park.
	for range 4 {
		tb.passTime(t, 250*time.Millisecond)
		_, err := tb.store.TimeOutWaits(tb.ctx, "sweeper", 100)
		require.NoError(t, err)
	}
	list, _, err = tb.store.Checkpoints(tb.ctx, "dropped-chat", "graph", 0, 10)
	require.NoError(t, err)
	require.Empty(t, list, "a cancelled wait keeps nothing alive")
	n, err := rdb.Exists(tb.ctx, keys.Checkpoints("dropped-chat")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, rdb.ZCard(tb.ctx, keys.Waits(fence.ShardOf("dropped-chat"))).Val()+
		rdb.ZCard(tb.ctx, keys.Waits(fence.ShardOf("kept-chat"))).Val(), "no wait left in the sweeper's index")
}
