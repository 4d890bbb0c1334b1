package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// Runs submitted concurrently to one thread with "enqueue" all run, one at a
// time: no run's first claim comes before the previous run finished.
func TestThreadRunsNeverOverlap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		time.Sleep(10 * time.Millisecond) // the node's work
		return nil
	}
	for _, id := range []string{"w1", "w2"} {
		b.worker(b.fastConfig(id), map[string]runner.Kind{"step": rec})
	}
	const runs = 6
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.submit(fmt.Sprintf(`{"id":"turn-%d","thread":"conv","multitask":"enqueue","nodes":[
				{"id":"think","kind":"step"},{"id":"answer","kind":"step","deps":["think"]}]}`, i))
		}()
	}
	wg.Wait()
	type span struct {
		run        string
		start, end time.Time
	}
	var spans []span
	for i := range runs {
		id := fmt.Sprintf("turn-%d", i)
		require.Equal(t, "SUCCEEDED", b.waitRun(id, 30*time.Second).Status, id)
		s := span{run: id}
		for _, e := range b.events(id) {
			switch e.Type {
			case "claimed":
				if s.start.IsZero() {
					s.start = e.At
				}
			case "run_finished":
				s.end = e.At
			}
		}
		spans = append(spans, s)
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		require.False(t, spans[i].start.Before(spans[i-1].end),
			"%s started at %s, before %s finished at %s", spans[i].run, spans[i].start, spans[i-1].run, spans[i-1].end)
	}
}

// The worker whose commit ends a thread's active run starts the run queued
// behind it at once, told by the commit itself: with the sweeper's pass
// over queued threads an hour away, the queued run still runs within
// seconds.
func TestCommitStartsTheQueuedRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	rec := newRecorder()
	rec.block = func(ctx context.Context, task *runner.Task) error {
		if task.Lease.Run == "first" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	cfg := b.fastConfig("w1")
	cfg.SweepInterval = time.Hour
	b.worker(cfg, map[string]runner.Kind{"step": rec})
	b.submit(`{"id":"first","thread":"chat","multitask":"enqueue","nodes":[{"id":"n","kind":"step"}]}`)
	waitFor(t, 10*time.Second, "first's node running", func() bool {
		info, err := b.client.Status(context.Background(), "first")
		require.NoError(t, err)
		return info.Nodes[0].State == "RUNNING"
	})
	b.submit(`{"id":"second","thread":"chat","multitask":"enqueue","nodes":[{"id":"n","kind":"step"}]}`)
	info, err := b.client.Status(context.Background(), "second")
	require.NoError(t, err)
	require.Equal(t, "QUEUED", info.Status)
	close(release)
	require.Equal(t, "SUCCEEDED", b.waitRun("first", 10*time.Second).Status)
	require.Equal(t, "SUCCEEDED", b.waitRun("second", 10*time.Second).Status, "started by the commit that ended first")
}

// "interrupt" cancels the thread's active run (its handler sees
// ErrRunCancelled, the run ends CANCELLED) and starts the new run after it;
// "rollback" does the same and deletes the checkpoints the cancelled run
// wrote, so the new run starts from the state before it.
func TestInterruptAndRollbackThroughTheWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := b.client.Store()
	causes := make(chan error, 4)
	started := make(chan string, 4)
	kinds := map[string]runner.Kind{
		// save stores {"by": run} as the thread's checkpoint and returns.
		"save": runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
			_, err := store.SaveCheckpoint(ctx, task.Lease, fence.CheckpointWrite{NS: "state", ID: "by-" + task.Lease.Run,
				Data: json.RawMessage(fmt.Sprintf(`{"by":%q}`, task.Lease.Run))})
			return json.RawMessage(`"saved"`), err
		}),
		// hang saves too, then waits for its context to end.
		"hang": runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
			if _, err := store.SaveCheckpoint(ctx, task.Lease, fence.CheckpointWrite{NS: "state",
				ID: "by-" + task.Lease.Run, Data: json.RawMessage(fmt.Sprintf(`{"by":%q}`, task.Lease.Run))}); err != nil {
				return nil, err
			}
			started <- task.Lease.Run
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return nil, context.Cause(ctx)
		}),
		// read returns the checkpoint it starts from.
		"read": runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
			cp, err := store.LatestCheckpoint(ctx, task.Lease.Thread, "state")
			if err != nil {
				return nil, err
			}
			return cp.Data, nil
		}),
	}
	b.worker(b.fastConfig("w1"), kinds)

	require.Equal(t, "SUCCEEDED", b.waitRun(b.submit(`{"id":"first","thread":"chat","multitask":"enqueue",
		"nodes":[{"id":"n","kind":"save"}]}`), 10*time.Second).Status)

	for _, tc := range []struct{ strategy, hanging, next, want string }{
		{"interrupt", "long-1", "int", `{"by":"long-1"}`},
		{"rollback", "long-2", "rb", `{"by":"int"}`},
	} {
		b.submit(fmt.Sprintf(`{"id":%q,"thread":"chat","multitask":"enqueue","nodes":[{"id":"n","kind":"hang"}]}`, tc.hanging))
		require.Equal(t, tc.hanging, recv(t, started, 10*time.Second))
		sub, err := b.client.Submit(context.Background(), mustSpec(t, fmt.Sprintf(
			`{"id":%q,"thread":"chat","multitask":%q,"nodes":[{"id":"n","kind":"read"},{"id":"s","kind":"save","deps":["n"]}]}`,
			tc.next, tc.strategy)))
		require.NoError(t, err)
		require.Equal(t, "QUEUED", sub.Status)
		require.Equal(t, tc.hanging, sub.Behind)

		require.ErrorIs(t, recv(t, causes, 10*time.Second), runner.ErrRunCancelled, tc.strategy)
		require.Equal(t, "CANCELLED", b.waitRun(tc.hanging, 10*time.Second).Status)
		info := b.waitRun(tc.next, 10*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, tc.strategy)
		require.JSONEq(t, tc.want, string(info.Nodes[0].Result), "%s: the state the new run started from", tc.strategy)
	}
}

func mustSpec(t *testing.T, s string) *runner.RunSpec {
	t.Helper()
	spec, err := runner.ParseSpec([]byte(s))
	require.NoError(t, err)
	return spec
}
