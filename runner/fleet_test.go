package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// A worker's advertisement says what it runs and how its leases fare:
// the attempt it holds, its last renewal's round trip and margin, the
// lease's deadline, its TTL and how often it refreshes. Once the attempt
// ends, it is no longer listed as running.
func TestWorkerAdvertisesItsLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	cfg := b.fastConfig("w1")
	// A lease a loaded machine's pauses do not lose: one lost to a pause
	// would be retried and listed at epoch 2.
	cfg.LeaseTTL = 3 * time.Second
	b.worker(cfg, map[string]runner.Kind{
		"hold": runner.KindFunc(func(ctx context.Context, _ *runner.Task) (json.RawMessage, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return json.RawMessage(`{}`), nil
		}),
	})
	run := b.submit(`{"id":"adv","nodes":[{"id":"h","kind":"hold"}]}`)
	ad := func() fence.WorkerInfo {
		list, err := b.client.Workers(context.Background())
		require.NoError(t, err)
		require.Len(t, list, 1)
		return list[0]
	}
	waitFor(t, 10*time.Second, "the advertisement to show a renewal of the held lease", func() bool {
		h := ad().Health
		return h != nil && len(h.Running) == 1 && !h.RenewedAt.IsZero()
	})
	w := ad()
	require.Equal(t, []fence.RunningNode{{Run: run, Node: "h", Epoch: 1}}, w.Health.Running)
	require.Equal(t, int64(3000), w.LeaseTTLMs)
	require.Equal(t, int64(200), w.AdvertiseEveryMs, "every heartbeat interval (150ms), rounded up to sweeps (100ms)")
	require.Greater(t, w.Health.RTTMs, 0.0)
	require.Greater(t, w.Health.MarginMs, int64(0))
	require.LessOrEqual(t, w.Health.MarginMs, int64(3000))
	require.False(t, w.Health.LeaseUntil.IsZero())

	close(release)
	require.Equal(t, "SUCCEEDED", b.waitRun(run, 10*time.Second).Status)
	waitFor(t, 10*time.Second, "the finished attempt to leave the advertisement", func() bool {
		return len(ad().Health.Running) == 0
	})
}
