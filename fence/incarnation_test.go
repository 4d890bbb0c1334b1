package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A run id reused after retention freed it starts a new incarnation: its
// epochs start at 1 again, and its tokens are a resource of their own at a
// downstream guard. The new owner is admitted (not refused as older than the
// old run's epoch 2), and the two runs' tokens are never compared.
func TestReusedRunIDIsANewIncarnation(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		guard := fence.NewGuard(tb.be.Client, &fence.GuardOptions{Prefix: "guard"})
		first := tb.submit(t, spec("reuse", node("n")))
		c := tb.claim(t, "reuse", "n", "w1", longTTL)
		_, err := tb.store.Release(tb.ctx, c.Lease, "drain")
		require.NoError(t, err)
		old := tb.claim(t, "reuse", "n", "w2", longTTL)
		require.Equal(t, int64(2), old.Epoch)
		require.Equal(t, first.Incarnation, old.Incarnation)
		require.NoError(t, guard.Admit(tb.ctx, old.Token()))
		tb.commit(t, old, `"first run"`)

		// Retention frees the run id.
		n, err := tb.store.RetainFinished(tb.ctx, time.Second, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		tb.expireKeys(t)
		_, err = tb.store.GetRun(tb.ctx, "reuse")
		require.ErrorIs(t, err, fence.ErrNotFound, "retention freed the run id")

		second := tb.submit(t, spec("reuse", node("n")))
		require.NotEqual(t, first.Incarnation, second.Incarnation)
		fresh := tb.claim(t, "reuse", "n", "w3", longTTL)
		require.Equal(t, int64(1), fresh.Epoch, "a new run's epochs start again")
		require.NotEqual(t, old.Token().Resource(), fresh.Token().Resource())
		require.NoError(t, guard.Admit(tb.ctx, fresh.Token()), "the new owner is not refused as older than the old run")
		require.NoError(t, guard.Admit(tb.ctx, fresh.Token()), "and admitted again on a retry")

		// Within the new incarnation the guard fences as before.
		_, err = tb.store.Release(tb.ctx, fresh.Lease, "drain")
		require.NoError(t, err)
		next := tb.claim(t, "reuse", "n", "w4", longTTL)
		require.NoError(t, guard.Admit(tb.ctx, next.Token()))
		require.ErrorIs(t, guard.Admit(tb.ctx, fresh.Token()), fence.ErrStaleEpoch)

		// The token a child process or an HTTP call gets says which
		// incarnation it belongs to, and parses back.
		tok, err := fence.ParseToken(next.Token().String())
		require.NoError(t, err)
		require.Equal(t, next.Token(), tok)
		require.Equal(t, "reuse~"+second.Incarnation+"/n", tok.Resource())
	})
}

// Tokens written before incarnations existed still parse and fence.
func TestTokenWithoutIncarnation(t *testing.T) {
	t.Parallel()
	tok, err := fence.ParseToken("order-7/charge@3/c1")
	require.NoError(t, err)
	require.Equal(t, fence.Token{Run: "order-7", Node: "charge", Epoch: 3, ClaimID: "c1"}, tok)
	require.Equal(t, "order-7/charge@3/c1", tok.String())
	for _, bad := range []string{"r~/n@1/c", "r~a{b}/n@1/c", "r/n@1/c{d}"} {
		_, err := fence.ParseToken(bad)
		require.ErrorIs(t, err, fence.ErrInvalidID, bad)
	}
}

// expireKeys lets every key with a time to live expire: miniredis's TTL
// clock is moved, a real server's keys are waited for.
func (tb *testBundle) expireKeys(t *testing.T) {
	t.Helper()
	if tb.be.Mini != nil {
		tb.be.Mini.FastForward(time.Hour)
		return
	}
	require.Eventually(t, func() bool {
		keys, err := tb.be.Client.Keys(tb.ctx, "baton:*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			// 0 is a key due within the millisecond, not gone yet.
			if ttl, _ := tb.be.Client.PTTL(tb.ctx, k).Result(); ttl >= 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond)
}
