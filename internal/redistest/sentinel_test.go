package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// Killing the primary makes the sentinels elect the replica; a failover
// client, with passwords on the data nodes and the sentinels, then writes
// to it and reads back what was written before the kill.
func TestSentinelFailoverElectsTheReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Password: "data-pw", SentinelPassword: "sentinel-pw"})
	t.Logf("primary, replica and 3 sentinels up in %v", time.Since(start))
	require.Len(t, s.SentinelAddrs(), 3)

	old, err := s.PrimaryAddr(ctx)
	require.NoError(t, err)
	require.Equal(t, s.DataAddrs()[0], old)
	replica := s.DataAddrs()[1]

	c := s.Client()
	// On the replica before the kill. WAIT counts only writes on its own
	// connection: one pipeline is one connection.
	var acked *redis.Cmd
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "before", "v", 0)
		acked = p.Do(ctx, "WAIT", 1, 2000)
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, acked.Val())

	killed := time.Now()
	s.Kill(old)
	primary, err := s.WaitFailover(ctx, old)
	require.NoError(t, err)
	t.Logf("sentinels promoted the replica %v after the kill", time.Since(killed))
	require.Equal(t, replica, primary)

	// The failover client follows the +switch-master message or re-asks.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Set(ctx, "after", "w", 0).Err()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "failover client never reached the new primary: %v", err)
		time.Sleep(50 * time.Millisecond) // retry cadence of a client waiting out a failover
	}
	v, err := c.Get(ctx, "before").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v)
}
