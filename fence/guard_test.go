package fence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// guardBackend is one Admitter the guard suite runs against.
type guardBackend struct {
	name  string
	guard fence.Admitter
	rdb   redis.UniversalClient // nil for the MemoryGuard
}

// forEachGuard runs fn, as parallel subtests, on a Guard over miniredis, a
// Guard over a real redis-server and a MemoryGuard: all must decide alike.
func forEachGuard(t *testing.T, fn func(t *testing.T, gb guardBackend)) {
	t.Helper()
	var gbs []guardBackend
	for _, be := range redistest.Backends(t) {
		gbs = append(gbs, guardBackend{name: be.Name, guard: fence.NewGuard(be.Client, nil), rdb: be.Client})
	}
	gbs = append(gbs, guardBackend{name: "memory", guard: fence.NewMemoryGuard()})
	for _, gb := range gbs {
		t.Run(gb.name, func(t *testing.T) {
			t.Parallel()
			fn(t, gb)
		})
	}
}

func gtok(run, node string, epoch int64, claim string) fence.Token {
	return fence.Token{Run: run, Node: node, Epoch: epoch, ClaimID: claim}
}

// TestGuardOrdersEpochs: a newer epoch is admitted, an older one refused,
// the current owner may retry, and a second claim under the same epoch is
// refused.
func TestGuardOrdersEpochs(t *testing.T) {
	t.Parallel()
	forEachGuard(t, func(t *testing.T, gb guardBackend) {
		ctx := t.Context()
		steps := []struct {
			what string
			tok  fence.Token
			want error
		}{
			{"first token", gtok("pay", "charge", 1, "c1"), nil},
			{"its retry", gtok("pay", "charge", 1, "c1"), nil},
			{"a takeover skipping an epoch", gtok("pay", "charge", 3, "c3"), nil},
			{"a late epoch 2", gtok("pay", "charge", 2, "c2"), fence.ErrStaleEpoch},
			{"the paused first owner", gtok("pay", "charge", 1, "c1"), fence.ErrStaleEpoch},
			{"the owner retrying", gtok("pay", "charge", 3, "c3"), nil},
			{"epoch 3 issued twice", gtok("pay", "charge", 3, "other"), fence.ErrNotOwner},
			{"the next takeover", gtok("pay", "charge", 4, "c4"), nil},
			{"the old owner after it", gtok("pay", "charge", 3, "c3"), fence.ErrStaleEpoch},
		}
		for _, s := range steps {
			err := gb.guard.Admit(ctx, s.tok)
			if s.want == nil {
				require.NoError(t, err, "%s: %s", s.what, s.tok)
				continue
			}
			require.ErrorIs(t, err, s.want, "%s: %s", s.what, s.tok)
			require.True(t, fence.IsFenced(err), "%s: a refusal is a fencing error", s.what)
			require.Contains(t, err.Error(), "seen epoch ", "%s: the error names the newer epoch", s.what)
		}
	})
}

// TestGuardComparesEpochsAsNumbers: 10 is newer than 9 (not a string
// comparison), and epochs past 2^53 still compare exactly.
func TestGuardComparesEpochsAsNumbers(t *testing.T) {
	t.Parallel()
	forEachGuard(t, func(t *testing.T, gb guardBackend) {
		ctx := t.Context()
		require.NoError(t, gb.guard.Admit(ctx, gtok("r", "n", 9, "a")))
		require.NoError(t, gb.guard.Admit(ctx, gtok("r", "n", 10, "b")))
		require.ErrorIs(t, gb.guard.Admit(ctx, gtok("r", "n", 9, "a")), fence.ErrStaleEpoch)

		const big = int64(1)<<53 + 1 // a double rounds it to 2^53
		require.NoError(t, gb.guard.Admit(ctx, gtok("r", "big", big, "a")))
		require.ErrorIs(t, gb.guard.Admit(ctx, gtok("r", "big", big-1, "b")), fence.ErrStaleEpoch)
		require.NoError(t, gb.guard.Admit(ctx, gtok("r", "big", big+1, "c")))
		require.ErrorIs(t, gb.guard.Admit(ctx, gtok("r", "big", big, "a")), fence.ErrStaleEpoch)
	})
}

// TestGuardResourcesAreIndependent: a high epoch on one node says nothing
// about another node or another run's node of the same name.
func TestGuardResourcesAreIndependent(t *testing.T) {
	t.Parallel()
	forEachGuard(t, func(t *testing.T, gb guardBackend) {
		ctx := t.Context()
		require.NoError(t, gb.guard.Admit(ctx, gtok("r", "deploy", 7, "a")))
		require.NoError(t, gb.guard.Admit(ctx, gtok("r", "notify", 1, "b")), "another node")
		require.NoError(t, gb.guard.Admit(ctx, gtok("r2", "deploy", 1, "c")), "another run")
		require.NoError(t, gb.guard.Admit(ctx, gtok("r.deploy", "x", 1, "d")), "ids that join alike")
		require.ErrorIs(t, gb.guard.Admit(ctx, gtok("r", "deploy", 6, "e")), fence.ErrStaleEpoch)
		require.ErrorIs(t, gb.guard.Admit(ctx, gtok("r2", "deploy", 1, "f")), fence.ErrNotOwner)
	})
}

// TestGuardRefusesInvalidTokens: an id that could forge a hash tag, reach
// another key or split a token, or an epoch no claim issues, is refused
// before any key is built, and leaves nothing behind.
func TestGuardRefusesInvalidTokens(t *testing.T) {
	t.Parallel()
	bad := map[string]fence.Token{
		"empty run":        gtok("", "n", 1, "c"),
		"hash tag in run":  gtok("r}{x", "n", 1, "c"),
		"colon in node":    gtok("r", "n:other", 1, "c"),
		"empty node":       gtok("r", "", 1, "c"),
		"empty claim":      gtok("r", "n", 1, ""),
		"slash in claim":   gtok("r", "n", 1, "c/d"),
		"newline in claim": gtok("r", "n", 1, "c\nd"),
		"zero epoch":       gtok("r", "n", 0, "c"),
		"negative epoch":   gtok("r", "n", -5, "c"),
		"long node":        gtok("r", strings.Repeat("n", fence.MaxIDLen+1), 1, "c"),
	}
	forEachGuard(t, func(t *testing.T, gb guardBackend) {
		ctx := t.Context()
		for what, tok := range bad {
			err := gb.guard.Admit(ctx, tok)
			require.ErrorIs(t, err, fence.ErrInvalidID, what)
			require.False(t, fence.IsFenced(err), "%s: malformed, not stale", what)
		}
		if gb.rdb != nil {
			n, err := gb.rdb.DBSize(ctx).Result()
			require.NoError(t, err)
			require.Zero(t, n, "no key was written")
		}
		require.NoError(t, gb.guard.Admit(ctx, gtok("r", "n", 1, "c")), "the valid token is still new")
	})
}

// TestGuardConcurrentAdmitsNeverGoBack: epochs 1..N of several nodes are
// admitted from as many goroutines at once. Whatever the interleaving, once
// an admit of epoch E has returned, no admit that starts later lets an
// epoch below E in, and the newest epoch is always admitted.
func TestGuardConcurrentAdmitsNeverGoBack(t *testing.T) {
	t.Parallel()
	forEachGuard(t, func(t *testing.T, gb guardBackend) {
		ctx := t.Context()
		const nodes, epochs = 4, 40
		type admit struct {
			epoch      int64
			start, end time.Time
		}
		var (
			mu       sync.Mutex
			admitted = make([][]admit, nodes)
			wg       sync.WaitGroup
			start    = make(chan struct{})
		)
		for n := range nodes {
			for e := int64(1); e <= epochs; e++ {
				wg.Go(func() {
					<-start
					tok := gtok("run", fmt.Sprintf("n%d", n), e, fmt.Sprintf("claim-%d", e))
					t0 := time.Now()
					err := gb.guard.Admit(ctx, tok)
					t1 := time.Now()
					if err != nil {
						// Every epoch is sent once, so the one refusal possible is "stale".
						assert.ErrorIs(t, err, fence.ErrStaleEpoch, "%s", tok)
						return
					}
					mu.Lock()
					admitted[n] = append(admitted[n], admit{e, t0, t1})
					mu.Unlock()
				})
			}
		}
		close(start)
		wg.Wait()

		for n, as := range admitted {
			newest := false
			for _, a := range as {
				newest = newest || a.epoch == epochs
				for _, b := range as {
					if a.end.Before(b.start) {
						require.Less(t, a.epoch, b.epoch,
							"node n%d: epoch %d was admitted after epoch %d had been", n, b.epoch, a.epoch)
					}
				}
			}
			require.True(t, newest, "node n%d: the newest epoch was admitted", n)
			// Epoch N was admitted: no write of an older one may have landed
			// after it. (Checked before N is sent again, which would mask it.)
			node := fmt.Sprintf("n%d", n)
			for e := int64(1); e < epochs; e++ {
				require.ErrorIs(t, gb.guard.Admit(ctx, gtok("run", node, e, fmt.Sprintf("claim-%d", e))),
					fence.ErrStaleEpoch, "node %s: epoch %d after the race", node, e)
			}
			require.NoError(t, gb.guard.Admit(ctx, gtok("run", node, epochs, fmt.Sprintf("claim-%d", epochs))))
		}
	})
}

// TestGuardRecordTTL: the record lives TTL past the last admit; a refusal
// does not extend it; a negative TTL keeps it for good; once it expires the
// guard has forgotten the resource (as documented).
func TestGuardRecordTTL(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx, rdb := t.Context(), be.Client
			pttl := func(key string) time.Duration {
				t.Helper()
				d, err := rdb.PTTL(ctx, key).Result()
				require.NoError(t, err)
				return d
			}

			def := fence.NewGuard(rdb, nil)
			require.NoError(t, def.Admit(ctx, gtok("r", "n", 1, "a")))
			require.InDelta(t, fence.DefaultGuardTTL.Seconds(), pttl("baton:guard:r:n").Seconds(), 60,
				"default prefix and TTL")

			g := fence.NewGuard(rdb, &fence.GuardOptions{Prefix: "svc:guard", TTL: time.Minute})
			key := "svc:guard:r:n"
			require.NoError(t, g.Admit(ctx, gtok("r", "n", 2, "b")))
			require.InDelta(t, time.Minute.Seconds(), pttl(key).Seconds(), 5)
			fields, err := rdb.HGetAll(ctx, key).Result()
			require.NoError(t, err)
			require.Equal(t, map[string]string{"epoch": "2", "claim": "b"}, fields)

			// Stand in for time passing: a refusal leaves the TTL alone, an
			// admit (even a retry) restores it.
			require.NoError(t, rdb.PExpire(ctx, key, 5*time.Second).Err())
			require.ErrorIs(t, g.Admit(ctx, gtok("r", "n", 1, "a")), fence.ErrStaleEpoch)
			require.ErrorIs(t, g.Admit(ctx, gtok("r", "n", 2, "x")), fence.ErrNotOwner)
			require.LessOrEqual(t, pttl(key), 5*time.Second, "a refusal does not extend the record")
			require.NoError(t, g.Admit(ctx, gtok("r", "n", 2, "b")))
			require.Greater(t, pttl(key), 50*time.Second, "a retry extends it")

			forever := fence.NewGuard(rdb, &fence.GuardOptions{Prefix: "svc:guard", TTL: -1})
			require.NoError(t, forever.Admit(ctx, gtok("r", "n", 3, "c")))
			require.Equal(t, time.Duration(-1), pttl(key), "a negative TTL: no expiry")

			if be.Mini == nil {
				return // only miniredis's clock can be moved past a TTL
			}
			require.NoError(t, g.Admit(ctx, gtok("r", "other", 5, "e")))
			be.Mini.FastForward(time.Minute + time.Second)
			require.NoError(t, g.Admit(ctx, gtok("r", "other", 1, "a")), "an expired record is forgotten")
		})
	}
}

// TestGuardRefusesPausedWorker: the case the guard exists for, end to end
// with the Store. A worker claims a node and reaches the service; it pauses
// past its lease; another worker takes the node over and reaches the
// service; the first one resumes and is refused.
func TestGuardRefusesPausedWorker(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			store := fence.New(be.Client, nil)
			guard := fence.NewGuard(be.Client, nil) // the service shares baton's Redis here
			_, err := store.Submit(ctx, fence.SubmitArgs{Run: "pay", Digest: "d", Nodes: []fence.NodeSpec{{
				ID: "charge", Kind: "noop", Queue: "default", Input: "null",
				Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 3,
			}}})
			require.NoError(t, err)
			n := fence.NodeRef{Thread: "pay", Run: "pay", Node: "charge"}

			first, err := store.Claim(ctx, n, "w1", 200*time.Millisecond, 100*time.Millisecond)
			require.NoError(t, err)
			require.NoError(t, guard.Admit(ctx, first.Lease.Token()))

			be.Advance(t, 350*time.Millisecond) // w1 is paused past its lease and the grace
			second, err := store.Claim(ctx, n, "w2", time.Minute, 100*time.Millisecond)
			require.NoError(t, err)
			require.Greater(t, second.Lease.Epoch, first.Lease.Epoch)
			require.NoError(t, guard.Admit(ctx, second.Lease.Token()))

			err = guard.Admit(ctx, first.Lease.Token())
			require.ErrorIs(t, err, fence.ErrStaleEpoch, "w1 resumed")
			require.NoError(t, guard.Admit(ctx, second.Lease.Token()), "w2 may retry")
		})
	}
}

// TestGuardRedisDown: when the guard's Redis cannot answer, Admit fails with
// an error that is neither a refusal nor bad input: the service must not
// act, and the caller should try again.
func TestGuardRedisDown(t *testing.T) {
	t.Parallel()
	m, rdb := redistest.Mini(t)
	m.SetError("LOADING Redis is loading the dataset in memory")
	err := fence.NewGuard(rdb, nil).Admit(t.Context(), gtok("r", "n", 1, "c"))
	require.Error(t, err)
	require.False(t, fence.IsFenced(err))
	require.False(t, errors.Is(err, fence.ErrInvalidID))
}

// TestMemoryGuardDoneContext: a cancelled request admits nothing, as with a
// Guard whose Redis call is cancelled.
func TestMemoryGuardDoneContext(t *testing.T) {
	t.Parallel()
	g := fence.NewMemoryGuard()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, g.Admit(ctx, gtok("r", "n", 5, "c")), context.Canceled)
	require.NoError(t, g.Admit(t.Context(), gtok("r", "n", 1, "c")), "nothing was recorded")
}
