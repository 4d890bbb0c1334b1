package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	asynqkeys "github.com/batonrun/baton/internal/delivery"
	"github.com/batonrun/baton/runner"
)

// A chain that a commit would continue in-process stops at a paused queue:
// the node after the one running when the queue was paused is handed to
// Asynq, which holds it, and the chain goes on once the queue is resumed.
func TestPausedQueueHoldsAChainsNextNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started, release := make(chan struct{}), make(chan struct{})
	step := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		if task.Lease.Node == "a" {
			close(started)
			<-release
		}
		return json.RawMessage(`{}`), nil
	})
	w := b.worker(b.fastConfig("w1"), map[string]runner.Kind{"step": step})
	run := b.submit(`{"id":"chain-p","nodes":[{"id":"a","kind":"step"},
		{"id":"b","kind":"step","deps":["a"]},{"id":"c","kind":"step","deps":["b"]}]}`)
	<-started

	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	require.NoError(t, insp.PauseQueue("default"))
	n, err := b.rdb.Exists(t.Context(), asynqkeys.PausedKey("default")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "PausedKey is the key Asynq's pause sets")
	waitFor(t, 5*time.Second, "the worker to read the pause", func() bool { return len(runner.OpenQueues(w)) == 0 })
	close(release)

	waitFor(t, 5*time.Second, "b to be handed to Asynq", func() bool {
		qi, err := insp.GetQueueInfo("default")
		return err == nil && qi.Pending == 1 && qi.Paused
	})
	info, err := b.client.Status(t.Context(), run)
	require.NoError(t, err)
	assert.Equal(t, []string{"SUCCEEDED", "READY", "BLOCKED"}, []string{info.Nodes[0].State, info.Nodes[1].State, info.Nodes[2].State},
		"b was not continued onto the paused queue")
	assert.Zero(t, countEvents(b.events(run), "claimed")["b"])

	require.NoError(t, insp.UnpauseQueue("default"))
	assert.Equal(t, "SUCCEEDED", b.waitRun(run, 10*time.Second).Status)
}
