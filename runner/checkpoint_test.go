package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

type stepState struct {
	Step int `json:"step"`
}

// latestStep reads the newest checkpoint of ns; 0 when there is none.
func latestStep(ctx context.Context, t *runner.Task, ns string) (int, error) {
	cp, err := t.Checkpoint(ctx, ns)
	if errors.Is(err, fence.ErrNoCheckpoint) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var s stepState
	return s.Step, json.Unmarshal(cp.Data, &s)
}

// A failed attempt's checkpoint is where the next attempt starts: the
// second attempt reads what the first saved, and the thread's history
// holds both saves with who made them.
func TestTaskCheckpointResumesTheNextAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	kind := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		from, err := latestStep(ctx, task, "agent")
		if err != nil {
			return nil, err
		}
		if _, err := task.SaveCheckpoint(ctx, "agent", stepState{Step: from + 1}); err != nil {
			return nil, err
		}
		if task.Lease.Attempt == 1 {
			return nil, errors.New("crashed after its first step")
		}
		return json.RawMessage(fmt.Sprintf(`{"from":%d}`, from)), nil
	})
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"agent": kind})
	id := b.submit(`{"id":"resume","thread":"conv","nodes":[{"id":"a","kind":"agent","max_attempts":2}]}`)

	info := b.waitRun(id, 20*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.JSONEq(t, `{"from":1}`, string(info.Nodes[0].Result), "the second attempt started from the first one's checkpoint")
	list, next, err := b.client.Checkpoints(context.Background(), "conv", "agent", 0, 10)
	require.NoError(t, err)
	require.Zero(t, next)
	require.Len(t, list, 2)
	require.Equal(t, []int64{2, 1}, []int64{list[0].Version, list[1].Version}, "newest first")
	require.JSONEq(t, `{"step":2}`, string(list[0].Data))
	require.Equal(t, int64(2), list[0].Epoch)
	require.Equal(t, int64(1), list[1].Epoch)
	require.Equal(t, "resume", list[0].Run)
	require.Equal(t, "a", list[0].Node)
	require.Equal(t, "w1", list[0].Worker)
	require.Equal(t, 2, countEvents(b.events(id), "checkpointed")["a"])
}

// A worker that lost its node keeps running (a zombie: a process that was
// paused, or ignores its context) and tries to save its state after
// another worker took the node over. The store refuses it: the error
// matches fence.IsFenced, nothing changes, the refusal is an event, and
// the new owner, which resumed from the zombie's last accepted
// checkpoint, keeps the newest one.
func TestStaleCheckpointIsRefusedAfterTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	saved := make(chan struct{})
	zombieGo := make(chan struct{})
	zombieErr := make(chan error, 1)
	newOwnerSaved := make(chan struct{})
	kind := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		from, err := latestStep(ctx, task, "agent")
		if err != nil {
			return nil, err
		}
		if task.Lease.Owner == "zombie" {
			if _, err := task.SaveCheckpoint(ctx, "agent", stepState{Step: 1}); err != nil {
				return nil, err
			}
			close(saved)
			<-zombieGo // the worker is gone; this handler wakes up late
			_, err := task.SaveCheckpoint(context.WithoutCancel(ctx), "agent", stepState{Step: 99})
			zombieErr <- err
			return nil, err
		}
		if _, err := task.SaveCheckpoint(ctx, "agent", stepState{Step: from + 1}); err != nil {
			return nil, err
		}
		close(newOwnerSaved)
		<-zombieGo
		return json.RawMessage(fmt.Sprintf(`{"from":%d}`, from)), nil
	})
	zm := runner.NewMetrics(nil)
	zcfg := b.fastConfig("zombie")
	zcfg.Metrics = zm
	zombie := b.worker(zcfg, map[string]runner.Kind{"agent": kind})
	id := b.submit(`{"id":"stale","thread":"conv","nodes":[{"id":"a","kind":"agent"}]}`)
	recv(t, saved, 10*time.Second)
	zombie.Kill() // no more heartbeats; its handler is not told
	b.worker(b.fastConfig("heir"), map[string]runner.Kind{"agent": kind})
	recv(t, newOwnerSaved, 20*time.Second)
	close(zombieGo)

	err := recv(t, zombieErr, 10*time.Second)
	require.True(t, fence.IsFenced(err), "the zombie's save: %v", err)
	require.ErrorIs(t, err, fence.ErrStaleEpoch)
	require.Equal(t, 1.0, counterValue(t, zm.StaleRejected.WithLabelValues("checkpoint")))

	info := b.waitRun(id, 20*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.JSONEq(t, `{"from":1}`, string(info.Nodes[0].Result), "the new owner resumed from the zombie's last accepted checkpoint")
	cp, err := b.client.LatestCheckpoint(context.Background(), "conv", "agent")
	require.NoError(t, err)
	require.JSONEq(t, `{"step":2}`, string(cp.Data))
	require.Equal(t, int64(2), cp.Epoch)
	require.Equal(t, "heir", cp.Worker)
	list, _, err := b.client.Checkpoints(context.Background(), "conv", "agent", 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 2, "the refused save stored nothing")

	var refused int
	for _, e := range b.events(id) {
		if e.Type == "stale_rejected" && e.Details["op"] == "checkpoint" {
			refused++
			require.Equal(t, int64(1), e.Epoch)
			require.Equal(t, "2", e.Details["current_epoch"])
		}
	}
	require.Equal(t, 1, refused)
}

// A refused save ends the attempt as a lost lease does: the handler's
// context is cancelled with ErrLeaseLost, its result is not committed,
// and a later save is not even sent.
func TestRefusedCheckpointCancelsTheAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	causes := make(chan error, 2)
	kind := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		if task.Lease.Attempt > 1 {
			return json.RawMessage(`"second"`), nil
		}
		// The thread's checkpoints belong to another run now: the store
		// refuses this run's saves (fence.ErrNotActiveRun).
		if err := b.rdb.Set(ctx, fence.Keys{}.Active("busy"), "someone-else", 0).Err(); err != nil {
			return nil, err
		}
		_, err := task.SaveCheckpoint(ctx, "agent", stepState{Step: 1})
		causes <- err
		<-ctx.Done()
		causes <- context.Cause(ctx)
		_, err = task.SaveCheckpoint(context.WithoutCancel(ctx), "agent", stepState{Step: 2})
		causes <- err
		return json.RawMessage(`"first"`), nil
	})
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"agent": kind})
	id := b.submit(`{"id":"refused","thread":"busy","nodes":[{"id":"a","kind":"agent","max_attempts":1}]}`)
	require.ErrorIs(t, recv(t, causes, 10*time.Second), fence.ErrNotActiveRun)
	require.ErrorIs(t, recv(t, causes, 10*time.Second), runner.ErrLeaseLost)
	require.ErrorIs(t, recv(t, causes, 10*time.Second), runner.ErrLeaseLost)

	// The attempt wrote nothing more: its lease ran out and, with no
	// attempt left, the node failed; its result was never committed.
	info := b.waitRun(id, 20*time.Second)
	require.Equal(t, "FAILED", info.Status)
	require.Empty(t, countEvents(b.events(id), "committed"))
	require.Equal(t, map[string]int{"a": 1}, countEvents(b.events(id), "stale_rejected"), "one refusal: the second save was not sent")
	_, err := b.client.LatestCheckpoint(context.Background(), "busy", "agent")
	require.ErrorIs(t, err, fence.ErrNoCheckpoint)
}

// A save whose reply is lost after Redis ran it is retried under the same
// checkpoint id and stored once.
func TestCheckpointWithALostReplyIsSavedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	link := newLossyLink(t, 2) // every second call of each script loses its reply
	lossy := redis.NewClient(&redis.Options{Addr: b.srv.Addr(), MaxRetries: -1})
	lossy.AddHook(link)
	t.Cleanup(func() { _ = lossy.Close() })
	versions := make(chan int64, 4)
	kind := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		for i := 1; i <= 4; i++ {
			cp, err := task.SaveCheckpoint(ctx, "agent", stepState{Step: i})
			if err != nil {
				return nil, err
			}
			versions <- cp.Version
		}
		return nil, nil
	})
	cfg := b.fastConfig("lossy")
	cfg.Redis = lossy
	b.worker(cfg, map[string]runner.Kind{"agent": kind})
	id := b.submit(`{"id":"lossy","nodes":[{"id":"a","kind":"agent","max_attempts":1}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(id, 20*time.Second).Status)
	for want := int64(1); want <= 4; want++ {
		require.Equal(t, want, recv(t, versions, time.Second))
	}
	require.GreaterOrEqual(t, link.lostOf("checkpoint"), 2)
	list, _, err := b.client.Checkpoints(context.Background(), id, "agent", 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 4, "one checkpoint per call, whatever the replies lost")
	require.Equal(t, 4, countEvents(b.events(id), "checkpointed")["a"])
}

// A task made outside a worker has no store.
func TestTaskOutsideAWorkerHasNoCheckpoints(t *testing.T) {
	t.Parallel()
	task := runner.NewTask(fence.Lease{Thread: "t", Run: "t", Node: "n", Epoch: 1}, "k", nil, 0)
	_, err := task.SaveCheckpoint(context.Background(), "", map[string]int{"a": 1})
	require.ErrorIs(t, err, runner.ErrNoCheckpointStore)
	_, err = task.Checkpoint(context.Background(), "")
	require.ErrorIs(t, err, runner.ErrNoCheckpointStore)
}
