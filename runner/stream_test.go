package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// A Go kind streams through its Task: each call is one batch, the
// attempts are marked by metadata entries, and a failed attempt's chunks
// stay while the next attempt's follow its own metadata.
func TestTaskStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	kind := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		for i := range 3 {
			tok := fence.StreamChunk{Event: "messages", Data: json.RawMessage(fmt.Sprintf(`[{"content":"t%d"},{}]`, i))}
			if err := task.Stream(ctx, tok); err != nil {
				return nil, err
			}
		}
		if err := task.Stream(ctx, fence.StreamChunk{Event: "bad", Data: json.RawMessage(`{`)}); !errors.Is(err, fence.ErrInvalidData) {
			return nil, fmt.Errorf("bad data: %v", err)
		}
		if task.Lease.Attempt == 1 {
			return nil, errors.New("first attempt fails")
		}
		return json.RawMessage(`1`), task.Stream(ctx, fence.StreamChunk{Event: "values", Data: json.RawMessage(`{"done":true}`)})
	})
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"talk": kind})
	id := b.submit(`{"id":"streamed","nodes":[{"id":"a","kind":"talk","max_attempts":2}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(id, 20*time.Second).Status)

	es, err := b.client.Store().ReadStream(context.Background(), id, "", 0, 0)
	require.NoError(t, err)
	var got []string
	for _, e := range es {
		got = append(got, fmt.Sprintf("%d %s", e.Attempt, e.Event))
	}
	require.Equal(t, []string{"1 metadata", "1 messages", "1 messages", "1 messages",
		"2 metadata", "2 messages", "2 messages", "2 messages", "2 values"}, got)

	err = runner.NewTask(fence.Lease{Run: "r", Node: "n"}, "talk", nil, 0).Stream(context.Background(), fence.StreamChunk{Event: "values"})
	require.ErrorIs(t, err, runner.ErrNoStreamStore)
}
