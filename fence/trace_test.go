package fence

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// A run submitted without a trace takes the first trace context a runner
// proposes; a later proposal (another runner's) gets that one back, a
// retry of the first gets its own, and a run that does not exist is not
// created by a proposal.
func TestAdoptRunTraceFirstProposalWins(t *testing.T) {
	t.Parallel()
	_, rdb := redistest.Mini(t)
	s := New(rdb, nil)
	ctx := t.Context()
	_, err := s.Submit(ctx, SubmitArgs{Run: "r", Digest: "d", Nodes: []NodeSpec{
		{ID: "a", Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}})
	require.NoError(t, err)
	ref := NodeRef{Thread: "r", Run: "r", Node: "a"}
	first, second := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

	tr, at, err := s.RunTrace(ctx, ref)
	require.NoError(t, err)
	require.Empty(t, tr)
	require.False(t, at.IsZero(), "the submit time")

	for _, c := range []struct{ propose, want string }{{first, first}, {first, first}, {second, first}} {
		got, err := s.AdoptRunTrace(ctx, ref, c.propose)
		require.NoError(t, err)
		require.Equal(t, c.want, got)
	}
	tr, _, err = s.RunTrace(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, first, tr)
	info, err := s.GetRun(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", info.TraceID)

	gone := NodeRef{Thread: "nope", Run: "nope", Node: "a"}
	got, err := s.AdoptRunTrace(ctx, gone, first)
	require.NoError(t, err)
	require.Empty(t, got)
	n, err := rdb.Exists(ctx, s.keys.Run("nope", "nope")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no run hash was created")
	_, err = s.AdoptRunTrace(ctx, ref, "")
	require.ErrorContains(t, err, "empty trace context")
}
