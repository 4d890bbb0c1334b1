package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A finished run's keys get a time to live; an unfinished run's never.
func TestRetainExpiresFinishedRunsOnly(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *testBundle) {
		tb.submit(t, spec("kept", node("a"), node("b", "a")))
		require.Error(t, tb.store.Retain(tb.ctx, "kept", time.Hour), "a running run is not retained")

		c := tb.claim(t, "kept", "a", "w", longTTL)
		tb.commit(t, c, `1`)
		c = tb.claim(t, "kept", "b", "w", longTTL)
		tb.commit(t, c, `2`)
		require.NoError(t, tb.store.Retain(tb.ctx, "kept", time.Hour))

		rdb := tb.be.Client
		keys := tb.store.Keys()
		for _, k := range []string{keys.Run("kept", "kept"), keys.Events("kept", "kept"), keys.Locator("kept"),
			keys.Node("kept", "kept", "a"), keys.Node("kept", "kept", "b")} {
			ttl, err := rdb.TTL(tb.ctx, k).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, 59*time.Minute, k)
			require.LessOrEqual(t, ttl, time.Hour, k)
		}
		require.Equal(t, "SUCCEEDED", tb.getRun(t, "kept").Status, "still readable until it expires")

		n, err := tb.store.TrimRuns(tb.ctx, time.Now().Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		ids, err := tb.store.ListRuns(tb.ctx, 0, 10)
		require.NoError(t, err)
		require.Empty(t, ids)
	})
}
