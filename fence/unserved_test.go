package fence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A kind no live runner serves is named, with the nearest one served when
// it looks like a typo.
func TestUnservedSuggestsTheNearestKind(t *testing.T) {
	t.Parallel()
	live := []fence.WorkerInfo{{ID: "r1", Kinds: []string{"exec", "http", "sleep", "noop"}, Queues: []string{"default"}}}
	require.Equal(t, "no runner serves kind exce on queue default (did you mean exec?)", fence.Unserved(live, "exce", "default"))
	require.Equal(t, "no runner serves kind htp on queue default (did you mean http?)", fence.Unserved(live, "htp", "default"))
	require.Equal(t, "no runner serves kind summarize on queue default", fence.Unserved(live, "summarize", "default"))
	require.Empty(t, fence.Unserved(live, "exec", "default"))
	require.Equal(t, "no runner serves kind exec on queue critical", fence.Unserved(live, "exec", "critical"), "the kind is served, on another queue")
}
