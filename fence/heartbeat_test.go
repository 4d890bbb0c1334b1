package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// TestHeartbeatKeepsLeaseAlive: an owner that renews in time keeps its node
// for as long as it likes, far beyond one ttl; once it stops, the node is
// taken over. Heartbeats store progress and never finish the node.
func TestHeartbeatKeepsLeaseAlive(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		// A real server's clock runs while the test waits: a lease long
		// enough that a loaded machine's pauses between a beat and the
		// next claim do not outlast it (300 ms did, under -race).
		ttl := 300 * time.Millisecond
		if tb.real() {
			ttl = time.Second
		}
		tb.submit(t, spec("hb", node("n")))
		c := tb.claim(t, "hb", "n", "worker-a", ttl)

		// A handler that reports nothing beats with progress 0, what a
		// fresh node reads as: no progress is recorded.
		_, err := tb.store.Heartbeat(tb.ctx, c.Lease, ttl, 0)
		require.NoError(t, err)
		require.Empty(t, ofType(tb.events(t, "hb"), "progress"))

		until := c.Until
		for i := 1; i <= 10; i++ {
			r, err := tb.store.Heartbeat(tb.ctx, c.Lease, ttl, i*10)
			require.NoError(t, err, "beat %d", i)
			require.False(t, r.Cancelled)
			if i > 1 {
				require.True(t, r.Until.After(until), "beat %d moves the deadline", i)
			}
			until = r.Until

			tb.advance(t, ttl/2) // less than a ttl since the last beat
			_, err = tb.store.Claim(tb.ctx, ref("hb", "n"), "worker-b", ttl, grace)
			require.ErrorIs(t, err, fence.ErrNodeBusy, "beat %d", i)

			n := tb.nodeInfo(t, "hb", "n")
			require.Equal(t, "RUNNING", n.State, "a heartbeat never finishes the node")
			require.Equal(t, i*10, n.Progress)
			require.Equal(t, c.Epoch, n.Epoch)
		}
		// Over four ttls have passed since the claim: only the heartbeats held it.
		require.GreaterOrEqual(t, until.Sub(c.Until), 4*ttl)

		// Progress below zero keeps the stored one.
		_, err = tb.store.Heartbeat(tb.ctx, c.Lease, ttl, -1)
		require.NoError(t, err)
		require.Equal(t, 100, tb.nodeInfo(t, "hb", "n").Progress)
		progress := ofType(tb.events(t, "hb"), "progress")
		require.Len(t, progress, 10)
		require.Equal(t, "100", progress[9].Details["progress"])

		// Silence: the lease runs out and the node is taken over.
		tb.advance(t, ttl+grace+50*time.Millisecond)
		next := tb.claim(t, "hb", "n", "worker-b", longTTL)
		require.Equal(t, c.Epoch+1, next.Epoch)
		require.Equal(t, "worker-a", next.PrevOwner)
		_, err = tb.store.Heartbeat(tb.ctx, c.Lease, ttl, 0)
		require.ErrorIs(t, err, fence.ErrStaleEpoch)
	})
}

// TestHeartbeatBatch: one call renews many leases and reports each one's
// outcome; a fenced lease among them does not spoil the others.
func TestHeartbeatBatch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("batch", node("a"), node("b"), node("c")))
		a := tb.claim(t, "batch", "a", "worker-a", longTTL)
		b := tb.claim(t, "batch", "b", "worker-a", longTTL)
		c := tb.claim(t, "batch", "c", "worker-a", longTTL)
		_, err := tb.store.Release(tb.ctx, c.Lease, "handed over")
		require.NoError(t, err)
		c2 := tb.claim(t, "batch", "c", "worker-b", longTTL) // c's first lease is now stale

		// A restarted Redis has lost its script cache; a pipeline sends only
		// EVALSHA, so the batch must load the scripts itself.
		require.NoError(t, tb.be.Client.ScriptFlush(tb.ctx).Err())
		tb.advance(t, 50*time.Millisecond)

		rs, errs := tb.store.HeartbeatBatch(tb.ctx, []fence.Beat{
			{Lease: a.Lease, Progress: 30},
			{Lease: c.Lease, Progress: 99},
			{Lease: b.Lease, Progress: -1},
		}, longTTL)
		require.Len(t, rs, 3)
		require.Len(t, errs, 3)
		require.NoError(t, errs[0])
		require.ErrorIs(t, errs[1], fence.ErrStaleEpoch)
		require.True(t, fence.IsFenced(errs[1]))
		require.NoError(t, errs[2])
		require.True(t, rs[0].Until.After(a.Until), "a renewed")
		require.True(t, rs[2].Until.After(b.Until), "b renewed")

		info := map[string]fence.NodeInfo{}
		for _, n := range tb.getRun(t, "batch").Nodes {
			info[n.ID] = n
		}
		require.Equal(t, 30, info["a"].Progress)
		require.Equal(t, 0, info["b"].Progress)
		require.Equal(t, 0, info["c"].Progress, "the stale beat's progress is not stored")
		require.Equal(t, "worker-b", info["c"].Owner)
		require.Equal(t, c2.Epoch, info["c"].Epoch)
		require.Equal(t, rs[0].Until.UnixMilli(), info["a"].LeaseUntil.UnixMilli())

		stale := ofType(tb.events(t, "batch"), "stale_rejected")
		require.Len(t, stale, 1)
		require.Equal(t, "heartbeat", stale[0].Details["op"])
		require.Equal(t, "c", stale[0].Node)

		rs, errs = tb.store.HeartbeatBatch(tb.ctx, nil, longTTL)
		require.Empty(t, rs)
		require.Empty(t, errs)
	})
}
