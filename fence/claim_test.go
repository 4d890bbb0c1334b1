package fence_test

import (
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// TestClaimRace: two workers, 16 goroutines, one READY node. In every round
// exactly one claim wins, every loser is told ErrNodeBusy, and the epoch
// grows with every round. The winner releases the node for the next round.
func TestClaimRace(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		rounds := 1000
		if !tb.real() {
			rounds = 200 // miniredis serialises everything behind one lock; fewer rounds say as much
		}
		tb.submit(t, spec("race", node("n").attempts(1)))

		// Two workers: two stores over two separate connection pools.
		addr := tb.be.Client.(*redis.Client).Options().Addr
		workers := make([]*fence.Store, 2)
		for i := range workers {
			c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 8})
			t.Cleanup(func() { _ = c.Close() })
			workers[i] = fence.New(c, nil)
		}
		require.NoError(t, workers[0].Load(tb.ctx))

		const goroutines = 16
		var prevEpoch int64
		for round := 0; round < rounds; round++ {
			start := make(chan struct{})
			results := make([]*fence.Claimed, goroutines)
			errs := make([]error, goroutines)
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := g % 2
					<-start
					results[g], errs[g] = workers[w].Claim(tb.ctx, ref("race", "n"),
						[]string{"worker-a", "worker-b"}[w], longTTL, grace)
				}()
			}
			close(start)
			wg.Wait()

			var winner *fence.Claimed
			for g := 0; g < goroutines; g++ {
				if errs[g] == nil {
					require.Nil(t, winner, "round %d: a second claim succeeded", round)
					winner = results[g]
					continue
				}
				require.ErrorIs(t, errs[g], fence.ErrNodeBusy, "round %d", round)
			}
			require.NotNil(t, winner, "round %d: no claim succeeded", round)
			require.Greater(t, winner.Epoch, prevEpoch, "round %d: epoch must grow", round)
			prevEpoch = winner.Epoch

			_, err := tb.store.Release(tb.ctx, winner.Lease, "next round")
			require.NoError(t, err, "round %d", round)
		}
		// Losers never touched the counter: one epoch per round.
		n := tb.nodeInfo(t, "race", "n")
		require.Equal(t, int64(rounds), n.Epoch)
		require.Equal(t, "READY", n.State)
		require.Len(t, ofType(tb.events(t, "race"), "claimed"), rounds)
	})
}

// TestClaimDuplicateDelivery: a second delivery of a node that is running
// or done changes nothing.
func TestClaimDuplicateDelivery(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("dup", node("n")))
		c := tb.claim(t, "dup", "n", "worker-a", longTTL)
		require.Equal(t, int64(1), c.Epoch)
		require.Equal(t, int64(1), c.Attempt)
		require.Empty(t, c.PrevOwner)

		_, err := tb.store.Claim(tb.ctx, ref("dup", "n"), "worker-b", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeBusy)
		_, err = tb.store.Claim(tb.ctx, ref("dup", "n"), "worker-a", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeBusy, "even the owner's own redelivery")

		n := tb.nodeInfo(t, "dup", "n")
		require.Equal(t, "RUNNING", n.State)
		require.Equal(t, int64(1), n.Epoch)
		require.Equal(t, int64(1), n.Attempt)
		require.Equal(t, "worker-a", n.Owner)

		// The owner's lease still works after the refused claims.
		tb.commit(t, c, `{"ok":true}`)
		_, err = tb.store.Claim(tb.ctx, ref("dup", "n"), "worker-b", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNodeDone)
		require.Equal(t, int64(1), tb.nodeInfo(t, "dup", "n").Epoch)

		_, err = tb.store.Claim(tb.ctx, ref("dup", "missing"), "worker-b", longTTL, grace)
		require.ErrorIs(t, err, fence.ErrNotFound)
	})
}

// TestClaimLostAfterFailover: a failover lost claim A's write, so claim B is
// handed the same epoch. The claim id tells them apart: only B may commit.
func TestClaimLostAfterFailover(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("lost", node("n")))
		nodeKey := tb.store.Keys().Node("lost", "lost", "n")
		before, err := tb.be.Client.HGetAll(tb.ctx, nodeKey).Result()
		require.NoError(t, err)

		a := tb.claim(t, "lost", "n", "worker-a", longTTL)

		// The failover: the replica that takes over never saw A's claim.
		require.NoError(t, tb.be.Client.Del(tb.ctx, nodeKey).Err())
		require.NoError(t, tb.be.Client.HSet(tb.ctx, nodeKey, before).Err())

		b := tb.claim(t, "lost", "n", "worker-b", longTTL)
		require.Equal(t, a.Epoch, b.Epoch, "the same epoch is issued twice")
		require.NotEqual(t, a.ClaimID, b.ClaimID)

		_, errA := tb.store.Commit(tb.ctx, a.Lease, []byte(`"A"`), a.Dependents)
		require.ErrorIs(t, errA, fence.ErrNotOwner)
		require.True(t, fence.IsFenced(errA))
		_, errB := tb.store.Commit(tb.ctx, b.Lease, []byte(`"B"`), b.Dependents)
		require.NoError(t, errB)
		_, errA = tb.store.Commit(tb.ctx, a.Lease, []byte(`"A"`), a.Dependents)
		require.ErrorIs(t, errA, fence.ErrNotOwner, "A stays fenced after B committed")

		n := tb.nodeInfo(t, "lost", "n")
		require.Equal(t, "SUCCEEDED", n.State)
		require.JSONEq(t, `"B"`, string(n.Result))
		require.Equal(t, "worker-b", n.Owner)

		evs := tb.events(t, "lost")
		require.Len(t, ofType(evs, "committed"), 1)
		require.Equal(t, "worker-b", ofType(evs, "committed")[0].Worker)
		stale := ofType(evs, "stale_rejected")
		require.Len(t, stale, 2)
		for _, e := range stale {
			require.Equal(t, "commit", e.Details["op"])
			require.Equal(t, "worker-a", e.Worker)
		}
	})
}
