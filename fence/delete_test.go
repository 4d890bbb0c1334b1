package fence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
)

// A delete removes an ended run whole, with or without a thread, so its id
// can be used again, and refuses a run that has not ended, naming its
// status. On a real redis-server.
func TestDeleteRun(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := New(rdb, nil)
	ctx := t.Context()
	one := []NodeSpec{{ID: "a", Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 1}}
	for _, thread := range []string{"", "chat-1"} {
		run := "del-" + thread
		_, err := s.Submit(ctx, SubmitArgs{Run: run, Thread: thread, Digest: "d", Nodes: one})
		require.NoError(t, err)
		ref := NodeRef{Thread: thread, Run: run, Node: "a"}
		if thread == "" {
			ref.Thread = run
		}

		_, err = s.DeleteRun(ctx, run)
		var active *RunActiveError
		require.ErrorAs(t, err, &active, "a RUNNING run is not deleted")
		assert.Equal(t, "RUNNING", active.Status)
		_, err = s.GetRun(ctx, run)
		require.NoError(t, err, "a refused delete changes nothing")

		c, err := s.Claim(ctx, ref, "w", time.Minute, time.Second)
		require.NoError(t, err)
		_, err = s.Commit(ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)
		status, err := s.DeleteRun(ctx, run)
		require.NoError(t, err)
		assert.Equal(t, "SUCCEEDED", status)

		_, err = s.GetRun(ctx, run)
		require.ErrorIs(t, err, ErrNotFound)
		ids, err := s.ListRuns(ctx, 0, 100)
		require.NoError(t, err)
		assert.NotContains(t, ids, run, "the listing forgets it")
		n, err := rdb.Exists(ctx, s.keys.Locator(run), s.keys.Run(ref.Thread, run), s.keys.Events(ref.Thread, run),
			s.keys.Node(ref.Thread, run, "a")).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no key of the run is left")
		_, err = s.DeleteRun(ctx, run)
		require.ErrorIs(t, err, ErrNotFound)

		_, err = s.Submit(ctx, SubmitArgs{Run: run, Thread: "other" + run, Digest: "d2", Nodes: one})
		require.NoError(t, err, "its id is free again, in another thread too")
	}
}
