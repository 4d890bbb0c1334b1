package fence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// clusterBundle is a store on a real 3-master Redis Cluster, where a
// limit's keys live in another slot than a node's (limitcluster.go).
type clusterBundle struct {
	store *fence.Store
	rdb   *redis.ClusterClient
	wakes *wakeLog
}

// setLimit sets name's concurrency and submits one run per id, each with
// one node "a" naming name; it checks that no run shares the limit's slot.
func (cb *clusterBundle) setLimit(t *testing.T, name string, concurrency int, runs ...string) {
	t.Helper()
	require.NoError(t, cb.store.SetLimit(t.Context(), fence.Limit{Name: name, Concurrency: concurrency}))
	for _, r := range runs {
		require.NotEqual(t, fence.Slot(fence.Keys{}.LimitHolders(name)), fence.Slot(fence.Keys{}.Run(r, r)))
		res, err := cb.store.Submit(t.Context(), limited(r, name+"=1"))
		require.NoError(t, err)
		require.True(t, res.Created)
	}
}

// holders are the claims holding a slot of key, by node ref, with their
// deadlines as stored ("claim@ms"), and slots handed to woken waiters.
func (cb *clusterBundle) holders(t *testing.T, key string) map[string]string {
	t.Helper()
	h, err := cb.rdb.HGetAll(t.Context(), fence.Keys{}.LimitHolders(key)).Result()
	require.NoError(t, err)
	delete(h, "~c")
	return h
}

// inUse is what `enqueue limit list` shows for key: live holders only.
func (cb *clusterBundle) inUse(t *testing.T, key string) (inUse, waiting int) {
	t.Helper()
	states, err := cb.store.LimitStates(t.Context())
	require.NoError(t, err)
	for _, s := range states {
		for _, k := range s.Keys {
			if k.Key == key {
				return k.InUse, k.Waiting
			}
		}
	}
	t.Fatalf("limit key %s not listed", key)
	return 0, 0
}

func (cb *clusterBundle) claim(t *testing.T, run, owner, claimID string, ttl time.Duration) (*fence.Claimed, error) {
	t.Helper()
	return cb.store.ClaimAs(t.Context(), ref(run, "a"), owner, claimID, ttl, grace)
}

// holdsOnly requires that key's only holder is claim, for run's node.
func (cb *clusterBundle) holdsOnly(t *testing.T, key, run, claim string) {
	t.Helper()
	h := cb.holders(t, key)
	require.Len(t, h, 1, "one holder: %v", h)
	require.True(t, strings.HasPrefix(h[fence.Ref(run, run, "a")], claim+"@"), "%s holds the slot: %v", claim, h)
}

// TestLimitOnCluster: limits on a real 3-master Redis Cluster, each
// subtest on a limit key of its own: the claim takes a slot in the
// limit's slot and claims the node in the node's, and every end, lost
// reply, takeover and crash between the two steps leaves the slots
// neither leaked nor held twice.
func TestLimitOnCluster(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	rdb := rc.Client()
	cb := &clusterBundle{store: fence.New(rdb, nil), rdb: rdb, wakes: &wakeLog{}}
	cb.store.SetWake(cb.wakes.fn)
	ctx := t.Context()

	t.Run("take, extend, free and a waiter woken", func(t *testing.T) {
		cb.setLimit(t, "k1", 2, "t1", "t2", "t3")
		c1, err := cb.claim(t, "t1", "w1", "c1", longTTL)
		require.NoError(t, err)
		require.Equal(t, "k1=1", c1.Limits)
		_, err = cb.claim(t, "t2", "w1", "c2", longTTL)
		require.NoError(t, err)
		_, err = cb.claim(t, "t3", "w1", "c3", longTTL)
		var lw *fence.LimitWaitError
		require.ErrorAs(t, err, &lw)
		require.Equal(t, "k1", lw.Key)
		require.Equal(t, "waiting: for a slot of limit k1 (first come, first served)",
			nodeWaits(t, cb.store, "t3"))
		inUse, waiting := cb.inUse(t, "k1")
		require.Equal(t, 2, inUse)
		require.Equal(t, 1, waiting)

		before := cb.holders(t, "k1")[c1.Ref()]
		_, err = cb.store.Heartbeat(ctx, c1.Lease, longTTL, 10)
		require.NoError(t, err)
		require.NotEqual(t, before, cb.holders(t, "k1")[c1.Ref()], "the heartbeat moved the holder's deadline")

		_, err = cb.store.Commit(ctx, c1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"t3"}, cb.wakes.take(), "the freed slot woke the waiter")
		c3, err := cb.claim(t, "t3", "w2", "c3", longTTL)
		require.NoError(t, err)
		require.Empty(t, nodeWaits(t, cb.store, "t3"))
		inUse, waiting = cb.inUse(t, "k1")
		require.Equal(t, 2, inUse)
		require.Zero(t, waiting)
		c2 := &fence.Claimed{Lease: fence.Lease{Thread: "t2", Run: "t2", Node: "a", Epoch: 1, ClaimID: "c2", Owner: "w1", Limits: "k1=1"}}
		for _, c := range []*fence.Claimed{c2, c3} {
			_, err = cb.store.Commit(ctx, c.Lease, []byte(`1`), nil)
			require.NoError(t, err)
		}
		require.Empty(t, cb.holders(t, "k1"), "all slots free")
	})

	t.Run("a lost reply of each call is answered as the first time", func(t *testing.T) {
		cb.setLimit(t, "k2", 1, "l1", "l2")
		first, err := cb.claim(t, "l1", "w1", "cl1", longTTL)
		require.NoError(t, err)
		again, err := cb.claim(t, "l1", "w1", "cl1", longTTL) // the claim's reply was lost
		require.NoError(t, err)
		require.Equal(t, first.Epoch, again.Epoch)
		require.Equal(t, first.Attempt, again.Attempt)
		require.Equal(t, "k2=1", again.Limits, "the replay names the node's limits")
		cb.holdsOnly(t, "k2", "l1", "cl1")
		// The take alone, again: this claim's own holder, nothing more taken.
		out, taken, err := cb.store.TakeLimitsForTest(ctx, ref("l1", "a"), "cl1", "k2=1", "cl1", "default", longTTL)
		require.NoError(t, err)
		require.Empty(t, out)
		require.Equal(t, []string{"k2"}, taken)
		cb.holdsOnly(t, "k2", "l1", "cl1")
		for range 2 { // a heartbeat whose reply was lost
			_, err = cb.store.Heartbeat(ctx, first.Lease, longTTL, -1)
			require.NoError(t, err)
		}
		cb.holdsOnly(t, "k2", "l1", "cl1")
		_, err = cb.claim(t, "l2", "w1", "cl2", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait)
		_, err = cb.store.Commit(ctx, first.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		replay, err := cb.store.Commit(ctx, first.Lease, []byte(`1`), nil) // the commit's reply was lost
		require.NoError(t, err)
		require.True(t, replay.Replay)
		require.Equal(t, []string{"l2"}, cb.wakes.take(), "woken once: the replay found no slot to free")
		c2, err := cb.claim(t, "l2", "w1", "cl2", longTTL)
		require.NoError(t, err)
		cb.store.FreeLimitsForTest(ctx, first.Lease) // the free's reply was lost: again
		cb.holdsOnly(t, "k2", "l2", "cl2")
		_, err = cb.store.Commit(ctx, c2.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "k2"))
	})

	t.Run("a takeover moves the slot and the stale claim frees nothing", func(t *testing.T) {
		cb.setLimit(t, "k3", 1, "o1", "o2")
		old, err := cb.claim(t, "o1", "paused", "old", shortTTL)
		require.NoError(t, err)
		var took *fence.Claimed
		waitFor(t, 5*time.Second, "the lease to run out and be taken over", func() bool {
			took, err = cb.claim(t, "o1", "w2", "new", longTTL)
			if errors.Is(err, fence.ErrNodeBusy) {
				return false
			}
			require.NoError(t, err)
			return true
		})
		require.Equal(t, "paused", took.PrevOwner)
		cb.holdsOnly(t, "k3", "o1", "new")
		// The paused owner wakes: its heartbeat finds its slot moved, its
		// commit is fenced, and its late free frees nothing.
		_, err = cb.store.Heartbeat(ctx, old.Lease, longTTL, -1)
		require.ErrorIs(t, err, fence.ErrNotOwner)
		_, err = cb.store.Commit(ctx, old.Lease, []byte(`1`), nil)
		require.True(t, fence.IsFenced(err), "%v", err)
		cb.store.FreeLimitsForTest(ctx, old.Lease)
		cb.holdsOnly(t, "k3", "o1", "new")
		_, err = cb.claim(t, "o2", "w3", "o2c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait, "the slot is the takeover's")
		_, err = cb.store.Commit(ctx, took.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"o2"}, cb.wakes.take())
		c2, err := cb.claim(t, "o2", "w3", "o2c", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c2.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "k3"))
	})

	t.Run("a crash between take and claim: the holder runs out, never two live holders", func(t *testing.T) {
		cb.setLimit(t, "k4", 1, "x1", "x2")
		// A claimer takes x1's slot and dies before its claim.
		out, taken, err := cb.store.TakeLimitsForTest(ctx, ref("x1", "a"), "dead", "k4=1", "", "default", shortTTL)
		require.NoError(t, err)
		require.Empty(t, out)
		require.Equal(t, []string{"k4"}, taken)
		// Another claim of x1 sees a claim in flight; x2 waits for the slot.
		_, err = cb.claim(t, "x1", "w", "live", longTTL)
		var nd *fence.NotDueError
		require.ErrorAs(t, err, &nd)
		_, err = cb.claim(t, "x2", "w", "x2c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait)
		cb.holdsOnly(t, "k4", "x1", "dead")
		var c2 *fence.Claimed
		waitFor(t, 5*time.Second, "the dead take's holder to run out", func() bool {
			inUse, _ := cb.inUse(t, "k4")
			require.LessOrEqual(t, inUse, 1, "never two live holders")
			c2, err = cb.claim(t, "x2", "w", "x2c", longTTL)
			if errors.Is(err, fence.ErrLimitWait) {
				return false
			}
			require.NoError(t, err)
			return true
		})
		cb.holdsOnly(t, "k4", "x2", "x2c")
		_, err = cb.claim(t, "x1", "w", "live", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait, "x1 waits its turn; its dead take holds nothing")
		_, err = cb.store.Commit(ctx, c2.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"x1"}, cb.wakes.take())
		c1, err := cb.claim(t, "x1", "w", "live", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "k4"))
	})

	t.Run("a paused holder's slot runs out and its lease is not renewed", func(t *testing.T) {
		cb.setLimit(t, "k5", 1, "p1", "p2")
		paused, err := cb.claim(t, "p1", "paused", "p1c", shortTTL)
		require.NoError(t, err)
		var c2 *fence.Claimed
		waitFor(t, 5*time.Second, "the paused claim's holder to run out", func() bool {
			c2, err = cb.claim(t, "p2", "w", "p2c", longTTL)
			if errors.Is(err, fence.ErrLimitWait) {
				return false
			}
			require.NoError(t, err)
			return true
		})
		_, err = cb.store.Heartbeat(ctx, paused.Lease, shortTTL, -1)
		require.ErrorIs(t, err, fence.ErrNotOwner, "a lease never outlives its slot")
		cb.holdsOnly(t, "k5", "p2", "p2c")
		_, err = cb.store.Commit(ctx, c2.Lease, []byte(`1`), nil)
		require.NoError(t, err)
	})

	t.Run("a late heartbeat takes its slot again only while one is free", func(t *testing.T) {
		cb.setLimit(t, "k7", 1, "v1", "v2")
		late, err := cb.claim(t, "v1", "late", "v1c", shortTTL)
		require.NoError(t, err)
		waitFor(t, 5*time.Second, "the holder to run out", func() bool {
			inUse, _ := cb.inUse(t, "k7")
			return inUse == 0
		})
		// Nobody took the slot or waits for it: the heartbeat takes it
		// again, and the slot is held once.
		_, err = cb.store.Heartbeat(ctx, late.Lease, longTTL, -1)
		require.NoError(t, err)
		cb.holdsOnly(t, "k7", "v1", "v1c")
		_, err = cb.claim(t, "v2", "w", "v2c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait)
		_, err = cb.store.Commit(ctx, late.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		c2, err := cb.claim(t, "v2", "w", "v2c", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c2.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"v2"}, cb.wakes.take())
		require.Empty(t, cb.holders(t, "k7"))
	})

	t.Run("a spent rate delays the node until its token is due", func(t *testing.T) {
		require.NoError(t, cb.store.SetLimit(ctx, fence.Limit{Name: "hourly", Rate: 1, Period: time.Hour}))
		for _, r := range []string{"h1", "h2"} {
			res, err := cb.store.Submit(ctx, limited(r, "hourly=1"))
			require.NoError(t, err)
			require.True(t, res.Created)
		}
		c1, err := cb.claim(t, "h1", "w", "h1c", longTTL)
		require.NoError(t, err)
		_, err = cb.claim(t, "h2", "w", "h2c", longTTL)
		var nd *fence.NotDueError
		require.ErrorAs(t, err, &nd)
		require.Equal(t, "hourly", nd.Limit)
		require.WithinDuration(t, time.Now().Add(time.Hour), nd.ReadyAt, time.Minute, "due when the next token is")
		require.Contains(t, nodeWaits(t, cb.store, "h2"), "waiting: rate limit hourly until ")
		_, err = cb.store.Commit(ctx, c1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "hourly"), "a rate holds no slot")
	})

	t.Run("a reported cost is charged once at the end", func(t *testing.T) {
		// 100 an hour, burst 100: 101 tokens when idle, none regained
		// during the test.
		require.NoError(t, cb.store.SetLimit(ctx, fence.Limit{Name: "tpm", Rate: 100, Period: time.Hour, Burst: 100}))
		res, err := cb.store.Submit(ctx, limited("s1", "tpm=~10"))
		require.NoError(t, err)
		require.True(t, res.Created)
		tokens := func() int64 {
			states, err := cb.store.LimitStates(ctx)
			require.NoError(t, err)
			for _, st := range states {
				if st.Name == "tpm" {
					return *st.Total().Tokens
				}
			}
			t.Fatal("tpm not listed")
			return 0
		}
		c, err := cb.claim(t, "s1", "w", "s1c", longTTL)
		require.NoError(t, err)
		require.Equal(t, int64(91), tokens(), "the claim took the spec's cost")
		for range 2 { // the second commit is a replay after a lost reply
			_, err = cb.store.CommitVia(ctx, nil, c.Lease, []byte(`1`), nil, fence.Continue{}, fence.Spend{Cost: 40, Reported: true})
			require.NoError(t, err)
			require.Equal(t, int64(61), tokens(), "the end charged 40 - 10 once")
		}
	})

	t.Run("a cancelled waiter handed a slot gives it back at its next claim", func(t *testing.T) {
		cb.setLimit(t, "k6", 1, "q1", "q2", "q3")
		c1, err := cb.claim(t, "q1", "w", "q1c", longTTL)
		require.NoError(t, err)
		for _, r := range []string{"q2", "q3"} {
			_, err = cb.claim(t, r, "w", r+"c", longTTL)
			require.ErrorIs(t, err, fence.ErrLimitWait)
		}
		_, err = cb.store.Commit(ctx, c1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"q2"}, cb.wakes.take())
		_, err = cb.store.Cancel(ctx, "q2", "test", "me")
		require.NoError(t, err)
		_, err = cb.claim(t, "q2", "w", "q2c", longTTL)
		require.ErrorIs(t, err, fence.ErrNodeDone)
		require.Equal(t, []string{"q3"}, cb.wakes.take(), "the handed slot went on")
		c3, err := cb.claim(t, "q3", "w", "q3c", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c3.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "k6"))
	})
}

// nodeWaits is node a's status line about the limit it waits for.
func nodeWaits(t *testing.T, s *fence.Store, run string) string {
	t.Helper()
	info, err := s.GetRun(t.Context(), run)
	require.NoError(t, err)
	for _, n := range info.Nodes {
		if n.ID == "a" {
			return n.Waiting
		}
	}
	return ""
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
