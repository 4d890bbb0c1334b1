package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// `workers` lists the live runners; `submit` of a run no runner serves
// succeeds with a warning on stderr, and `status` shows why the node waits.
func TestWorkersAndTheUnservedWarning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := fence.WorkerInfo{ID: "r1", Kinds: []string{"noop"}, Queues: []string{"default"},
		StartedAt: time.Now(), SeenAt: time.Now()}
	require.NoError(t, b.client.Store().Advertise(t.Context(), w, time.Minute))

	r := b.run(t, "", "workers")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^r1\s+noop\s+default\s`, r.stdout)
	r = b.run(t, "", "workers", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []fence.WorkerInfo
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 1)
	require.Equal(t, []string{"noop"}, list[0].Kinds)

	r = b.run(t, `{"id":"u","nodes":[{"id":"s","kind":"summarize"}]}`, "submit", "-")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "u\n", r.stdout)
	require.Equal(t, "enqueue: warning: no runner serves kind summarize on queue default; run u waits until one starts\n",
		r.stderr)
	r = b.run(t, "", "status", "u")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "waiting: no runner serves kind summarize on queue default")
}
