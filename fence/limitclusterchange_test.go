package fence_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// betweenSteps is a go-redis hook that calls fn once, right before the
// first call of script whose arguments include arg: another process's
// call landing between two steps of a claim on a Redis Cluster.
type betweenSteps struct {
	names map[string]string // script SHA1 -> name
	mu    sync.Mutex
	fn    func()
	name  string
	arg   string
}

func (b *betweenSteps) arm(name, arg string, fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.name, b.arg, b.fn = name, arg, fn
}

func (b *betweenSteps) fired() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fn == nil
}

func (b *betweenSteps) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b *betweenSteps) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (b *betweenSteps) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		b.mu.Lock()
		fn := b.fn
		match := false
		if fn != nil && len(args) > 1 {
			switch sha, _ := args[1].(string); cmd.Name() {
			case "evalsha":
				match = b.names[sha] == b.name
			case "eval":
				match = b.names[redis.NewScript(sha).Hash()] == b.name
			}
			hasArg := false
			for _, a := range args {
				if s, ok := a.(string); ok && s == b.arg {
					hasArg = true
				}
			}
			match = match && hasArg
		}
		if match {
			b.fn = nil
		}
		b.mu.Unlock()
		if match {
			fn()
		}
		return next(ctx, cmd)
	}
}

// TestLimitChangesOnCluster: on a real 3-master Redis Cluster, a claim
// refused after its take gives back what the take moved, and a changed
// limit holds for frees and handed slots as on a single server.
func TestLimitChangesOnCluster(t *testing.T) {
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	rdb := rc.Client()
	cb := &clusterBundle{store: fence.New(rdb, nil), rdb: rdb, wakes: &wakeLog{}}
	cb.store.SetWake(cb.wakes.fn)
	hook := &betweenSteps{names: redistest.ScriptNames(t)}
	hooked := rc.Client()
	hooked.AddHook(hook)
	racer := fence.New(hooked, nil)
	racer.SetWake(cb.wakes.fn)
	ctx := t.Context()

	// A paused owner wakes and renews its lease between a takeover's
	// first step and its take: the take moves the owner's holder, the
	// claim is refused (the lease is live again), and the give-back puts
	// the owner's holder back. Before, it deleted it: a second node was
	// admitted beside the live owner.
	t.Run("a refused takeover restores the live owner's slot", func(t *testing.T) {
		cb.setLimit(t, "r8", 1, "rt1", "rt2")
		owner, err := cb.claim(t, "rt1", "paused", "owner8", shortTTL)
		require.NoError(t, err)
		hook.arm("limit_take", "taker8", func() {
			_, err := cb.store.Heartbeat(ctx, owner.Lease, longTTL, -1)
			require.NoError(t, err, "the owner's heartbeat, before the take")
		})
		waitFor(t, 5*time.Second, "the takeover to reach its take", func() bool {
			_, err = racer.ClaimAs(ctx, ref("rt1", "a"), "w2", "taker8", longTTL, grace)
			return hook.fired()
		})
		require.ErrorIs(t, err, fence.ErrNodeBusy, "the owner renewed its lease")
		cb.holdsOnly(t, "r8", "rt1", "owner8")
		_, err = cb.claim(t, "rt2", "w3", "rt2c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait, "the owner still holds the only slot")
		_, err = cb.store.Heartbeat(ctx, owner.Lease, longTTL, -1)
		require.NoError(t, err, "the owner keeps its lease")
		_, err = cb.store.Commit(ctx, owner.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"rt2"}, cb.wakes.take())
		c2, err := cb.claim(t, "rt2", "w3", "rt2c", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c2.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "r8"))
	})

	t.Run("a lowered limit frees by the limit now stored", func(t *testing.T) {
		cb.setLimit(t, "low8", 3, "lh1", "lh2", "lh3", "lw1", "lw2")
		running := map[string]*fence.Claimed{}
		for _, r := range []string{"lh1", "lh2", "lh3"} {
			c, err := cb.claim(t, r, "w", r+"c", longTTL)
			require.NoError(t, err)
			running[r] = c
		}
		for _, r := range []string{"lw1", "lw2"} {
			_, err := cb.claim(t, r, "w", r+"c", longTTL)
			require.ErrorIs(t, err, fence.ErrLimitWait)
		}
		require.NoError(t, cb.store.SetLimit(ctx, fence.Limit{Name: "low8", Concurrency: 1}))
		for _, r := range []string{"lh1", "lh2"} {
			_, err := cb.store.Commit(ctx, running[r].Lease, []byte(`1`), nil)
			require.NoError(t, err)
			require.Empty(t, cb.wakes.take(), "lh3 runs under a limit of 1: nobody woken")
		}
		_, err := cb.claim(t, "lw1", "w", "lw1c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait)
		_, err = cb.store.Commit(ctx, running["lh3"].Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"lw1"}, cb.wakes.take())
		c1, err := cb.claim(t, "lw1", "w", "lw1c", longTTL)
		require.NoError(t, err)
		_, err = cb.claim(t, "lw2", "w", "lw2c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait, "one at a time")
		_, err = cb.store.Commit(ctx, c1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"lw2"}, cb.wakes.take())
		c2, err := cb.claim(t, "lw2", "w", "lw2c", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c2.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "low8"))
	})

	t.Run("a slot handed on before a limit was lowered is taken back", func(t *testing.T) {
		cb.setLimit(t, "hand8", 3, "hh1", "hh2", "hh3", "hw1")
		running := map[string]*fence.Claimed{}
		for _, r := range []string{"hh1", "hh2", "hh3"} {
			c, err := cb.claim(t, r, "w", r+"c", longTTL)
			require.NoError(t, err)
			running[r] = c
		}
		_, err := cb.claim(t, "hw1", "w", "hw1c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait)
		_, err = cb.store.Commit(ctx, running["hh1"].Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"hw1"}, cb.wakes.take())
		require.NoError(t, cb.store.SetLimit(ctx, fence.Limit{Name: "hand8", Concurrency: 1}))
		_, err = cb.claim(t, "hw1", "w", "hw1c", longTTL)
		require.ErrorIs(t, err, fence.ErrLimitWait, "two run under a limit of 1: the handed slot goes back")
		for _, r := range []string{"hh2", "hh3"} {
			_, err = cb.store.Commit(ctx, running[r].Lease, []byte(`1`), nil)
			require.NoError(t, err)
		}
		require.Equal(t, []string{"hw1"}, cb.wakes.take(), "woken once none runs")
		c, err := cb.claim(t, "hw1", "w", "hw1c", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Empty(t, cb.holders(t, "hand8"))
	})

	t.Run("a node naming two busy limits keeps its handed slot while it waits", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits 11 s")
		}
		for _, k := range []string{"sa", "sb"} {
			require.NoError(t, cb.store.SetLimit(ctx, fence.Limit{Name: k, Concurrency: 1}))
		}
		for r, l := range map[string]string{"sya1": "sa=1", "sya2": "sa=1", "szb1": "sb=1", "szb2": "sb=1", "sx": "sa=1,sb=1"} {
			res, err := cb.store.Submit(ctx, limited(r, l))
			require.NoError(t, err)
			require.True(t, res.Created)
		}
		ya1, err := cb.claim(t, "sya1", "w", "sya1c", longTTL)
		require.NoError(t, err)
		zb1, err := cb.claim(t, "szb1", "w", "szb1c", longTTL)
		require.NoError(t, err)
		wait := func(run string) {
			t.Helper()
			_, err := cb.claim(t, run, "w", run+"c", longTTL)
			require.ErrorIs(t, err, fence.ErrLimitWait, "%s waits", run)
		}
		wait("sx")
		wait("sya2")
		_, err = cb.store.Commit(ctx, ya1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"sx"}, cb.wakes.take())
		wait("sx") // sa handed to it; sb busy
		wait("szb2")
		time.Sleep(11 * time.Second) // past the 10 s a handed slot lasts, on the masters' clocks
		wait("sya2")                 // the sweeper's recheck: sa is still sx's
		_, err = cb.store.Commit(ctx, zb1.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.Equal(t, []string{"sx"}, cb.wakes.take())
		x, err := cb.claim(t, "sx", "w", "sxc", longTTL)
		require.NoError(t, err, "sx runs with both slots")
		_, err = cb.store.Commit(ctx, x.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"sya2", "szb2"}, cb.wakes.take())
	})

	t.Run("a raised limit wakes its waiters at once", func(t *testing.T) {
		cb.setLimit(t, "up8", 1, "uh1", "uw1", "uw2")
		h, err := cb.claim(t, "uh1", "w", "uh1c", longTTL)
		require.NoError(t, err)
		for _, r := range []string{"uw1", "uw2"} {
			_, err = cb.claim(t, r, "w", r+"c", longTTL)
			require.ErrorIs(t, err, fence.ErrLimitWait)
		}
		require.NoError(t, cb.store.SetLimit(ctx, fence.Limit{Name: "up8", Concurrency: 3}))
		require.Equal(t, []string{"uw1", "uw2"}, cb.wakes.take())
		all := []*fence.Claimed{h}
		for _, r := range []string{"uw1", "uw2"} {
			c, err := cb.claim(t, r, "w", r+"c", longTTL)
			require.NoError(t, err)
			all = append(all, c)
		}
		for _, c := range all {
			_, err = cb.store.Commit(ctx, c.Lease, []byte(`1`), nil)
			require.NoError(t, err)
		}
		require.Empty(t, cb.holders(t, "up8"))
	})

	// A heartbeat that lands after its claim ended (the worker's
	// heartbeat racing its own commit, or a paused worker waking after a
	// takeover) found the freed slot and took it again, and the node's
	// script then refused the lease: the ended claim held the slot for a
	// TTL and a half, and the next node waited that long. Found by
	// TestLimitModel on the cluster.
	t.Run("a late heartbeat of an ended claim takes no slot", func(t *testing.T) {
		cb.setLimit(t, "hb8", 1, "hb1", "hb2")
		c, err := cb.claim(t, "hb1", "w1", "hb-c1", longTTL)
		require.NoError(t, err)
		_, err = cb.store.Commit(ctx, c.Lease, []byte(`"done"`), nil)
		require.NoError(t, err)
		_, err = cb.store.Heartbeat(ctx, c.Lease, longTTL, -1)
		require.ErrorIs(t, err, fence.ErrNotRunning)
		require.Empty(t, cb.holders(t, "hb8"), "the ended claim holds no slot")
		_, err = cb.claim(t, "hb2", "w2", "hb-c2", longTTL)
		require.NoError(t, err, "the next node takes the slot at once")

		// The same through a batch of heartbeats, the runner's way.
		_, errs := cb.store.HeartbeatBatch(ctx, []fence.Beat{{Lease: c.Lease, Progress: -1}}, longTTL)
		require.True(t, fence.IsFenced(errs[0]), "%v", errs[0])
		cb.holdsOnly(t, "hb8", "hb2", "hb-c2")
	})
}
