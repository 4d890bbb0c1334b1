package fence_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// The fleet view lists a runner whose advertisement expired as expired,
// with what it last advertised, instead of dropping it as Workers does;
// one that withdrew is gone.
func TestFleetKeepsExpiredRunners(t *testing.T) {
	t.Parallel()
	m, rdb := redistest.Mini(t)
	s := fence.New(rdb, nil)
	ctx := t.Context()
	h := &fence.WorkerHealth{Running: []fence.RunningNode{{Run: "r", Node: "n", Epoch: 2}}, RTTMs: 1.5, MarginMs: 1800}
	require.NoError(t, s.Advertise(ctx, fence.WorkerInfo{ID: "live", Kinds: []string{"noop"}, Health: h}, time.Hour))
	require.NoError(t, s.Advertise(ctx, fence.WorkerInfo{ID: "paused", Kinds: []string{"exec"}, Health: h}, time.Second))
	require.NoError(t, s.Advertise(ctx, fence.WorkerInfo{ID: "stopped"}, time.Hour))
	require.NoError(t, s.Withdraw(ctx, "stopped"))
	m.FastForward(2 * time.Second) // the key of "paused" expires

	fleet, err := s.Fleet(ctx)
	require.NoError(t, err)
	require.Len(t, fleet, 2)
	require.Equal(t, "live", fleet[0].ID)
	require.False(t, fleet[0].Expired)
	require.Equal(t, h, fleet[0].Health)
	require.Equal(t, "paused", fleet[1].ID)
	require.True(t, fleet[1].Expired)
	require.Equal(t, []string{"exec"}, fleet[1].Kinds, "a lost runner's last advertisement")
	require.Equal(t, h, fleet[1].Health)

	live, err := s.Workers(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1, "Workers still lists only the live runners")
}
