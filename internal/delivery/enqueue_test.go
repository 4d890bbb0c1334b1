package delivery

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// The contract with Asynq v0.26: what Enqueuer writes without linking
// Asynq is what Asynq's own client writes, and Asynq's Inspector and
// Server take it as their own. These tests run on a real redis-server;
// the other packages' tests run the same script on miniredis.

var ref = fence.NodeRef{Thread: "th", Run: "r1", Node: "a"}

// A node's delivery, due now or later, reads back through Asynq's
// Inspector with every field a node delivery sets.
func TestEnqueuedTaskReadsBackThroughAsynqInspector(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	q := New(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)

	fresh, err := q.EnqueueNew(ctx, ref, "work", 1, time.Time{})
	require.NoError(t, err)
	require.True(t, fresh)
	info, err := insp.GetTaskInfo("work", TaskID(ref, 1))
	require.NoError(t, err)
	require.Equal(t, "work", info.Queue)
	require.Equal(t, "r1:a:1", info.ID)
	require.Equal(t, TaskType, info.Type)
	require.JSONEq(t, `{"thread":"th","run":"r1","node":"a"}`, string(info.Payload))
	require.Equal(t, asynq.TaskStatePending, info.State)
	require.Equal(t, 1000, info.MaxRetry)
	require.Equal(t, 7*24*time.Hour, info.Timeout)
	require.True(t, info.Deadline.IsZero(), "no deadline: %v", info.Deadline)
	require.WithinDuration(t, time.Now(), info.NextProcessAt, 5*time.Second)

	at := time.Now().Add(time.Hour).Truncate(time.Second)
	fresh, err = q.EnqueueNew(ctx, ref, "work", 2, at.Add(300*time.Millisecond))
	require.NoError(t, err)
	require.True(t, fresh)
	info, err = insp.GetTaskInfo("work", TaskID(ref, 2))
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStateScheduled, info.State)
	require.True(t, at.Equal(info.NextProcessAt), "due %v, Asynq says %v", at, info.NextProcessAt)

	_, err = q.EnqueueNew(ctx, ref, "other", 1, time.Time{})
	require.NoError(t, err)
	queues, err := insp.Queues()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"work", "other"}, queues)
	qi, err := insp.GetQueueInfo("work")
	require.NoError(t, err)
	require.Equal(t, 1, qi.Pending)
	require.Equal(t, 1, qi.Scheduled)
}

// A second enqueue of a task id that is there is refused, pending or
// scheduled, and changes nothing: the first delivery stays the only one.
func TestSecondEnqueueOfATaskIDIsAlreadyThere(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	q := New(rdb)
	for id, due := range map[string]time.Time{"dup-now": {}, "dup-later": time.Now().Add(time.Hour)} {
		fresh, err := q.EnqueueAs(ctx, id, ref, "work", due)
		require.NoError(t, err)
		require.True(t, fresh)
		fresh, err = q.EnqueueAs(ctx, id, fence.NodeRef{Thread: "other", Run: "r9", Node: "z"}, "work", time.Time{})
		require.NoError(t, err)
		require.False(t, fresh, "a task of that id is there already")
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	qi, err := insp.GetQueueInfo("work")
	require.NoError(t, err)
	require.Equal(t, 1, qi.Pending)
	require.Equal(t, 1, qi.Scheduled)
	info, err := insp.GetTaskInfo("work", "dup-now")
	require.NoError(t, err)
	require.JSONEq(t, `{"thread":"th","run":"r1","node":"a"}`, string(info.Payload), "the first delivery stands")
}

// An enqueue whose reply was lost and that is sent again (the same call's
// token) answers as the first time; another call is refused.
func TestEnqueueSentAgainAnswersAsTheFirstTime(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	keys := []string{taskKey("work", "t1"), pendingKey("work"), scheduledKey("work"), allQueues}
	msg := taskMessage("t1", "work", []byte(`{}`))
	for range 2 {
		n, err := enqueueScript.Run(ctx, rdb, keys, "t1", msg, 0, "work", "token-1").Int()
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	n, err := enqueueScript.Run(ctx, rdb, keys, "t1", msg, 0, "work", "token-2").Int()
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.Equal(t, int64(1), rdb.LLen(ctx, pendingKey("work")).Val(), "one task on the queue")
}

// The task message is byte for byte the one Asynq's client writes for the
// same task and options, so nothing that reads it can tell them apart.
func TestTaskMessageIsAsynqClientsMessage(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	b, err := json.Marshal(payload{Thread: ref.Thread, Run: ref.Run, Node: ref.Node})
	require.NoError(t, err)
	ac := asynq.NewClientFromRedisClient(rdb)
	_, err = ac.EnqueueContext(ctx, asynq.NewTask(TaskType, b), asynq.TaskID("x1"), asynq.Queue("work"),
		asynq.MaxRetry(1000), asynq.Timeout(7*24*time.Hour))
	require.NoError(t, err)
	theirs, err := rdb.HGet(ctx, taskKey("work", "x1"), "msg").Bytes()
	require.NoError(t, err)
	require.Equal(t, theirs, taskMessage("x1", "work", b))
}

// Asynq's Server runs what Enqueuer writes, due now or later; while a
// server holds a task it dequeued, RedeliverStuck enqueues another
// delivery of its node, and none for a task still pending.
func TestAsynqServerRunsEnqueuedTasks(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ctx := t.Context()
	q := New(rdb)

	got := make(chan string, 4)
	hold := make(chan struct{})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 2, Queues: map[string]int{"work": 1},
		TaskCheckInterval: 10 * time.Millisecond, DelayedTaskCheckInterval: 100 * time.Millisecond,
		LogLevel: asynq.FatalLevel})
	require.NoError(t, srv.Start(asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		n, _, err := DecodePayload(task.Payload())
		if err != nil || task.Type() != TaskType || n != ref {
			got <- "bad " + id
			return nil
		}
		got <- id
		if id == TaskID(ref, 1) {
			<-hold // a server that took the task and never claims its node
		}
		return nil
	})))
	t.Cleanup(srv.Shutdown)
	t.Cleanup(func() { close(hold) })

	next := func() string {
		select {
		case id := <-got:
			return id
		case <-time.After(10 * time.Second):
			t.Fatal("Asynq's server ran no task")
			return ""
		}
	}
	require.NoError(t, q.Enqueue(ctx, ref, "work", 1, time.Time{}))
	require.Equal(t, TaskID(ref, 1), next())

	again, err := q.RedeliverStuck(ctx, ref, "work", 1, time.Hour)
	require.NoError(t, err)
	require.True(t, again, "the task is active on a server that never claimed")
	require.Contains(t, next(), TaskID(ref, 1)+"~")

	require.NoError(t, q.Enqueue(ctx, ref, "work", 2, time.Now().Add(200*time.Millisecond)))
	require.Equal(t, TaskID(ref, 2), next(), "a delayed delivery runs when due")

	require.NoError(t, rdb.Set(ctx, PausedKey("work"), time.Now().Unix(), 0).Err())
	require.NoError(t, q.Enqueue(ctx, ref, "work", 3, time.Time{}))
	again, err = q.RedeliverStuck(ctx, ref, "work", 3, time.Hour)
	require.NoError(t, err)
	require.False(t, again, "a pending task waits its turn")
	again, err = q.RedeliverStuck(ctx, ref, "work", 9, time.Hour)
	require.NoError(t, err)
	require.False(t, again, "no task: the sweeper enqueues afresh")
}

// On a Redis Cluster the queue's name goes into asynq:queues apart (that
// set is in another slot), and Asynq's Inspector finds the queue and its
// task.
func TestEnqueueOnACluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	rdb := c.Client()
	ctx := t.Context()
	q := New(rdb)
	require.True(t, q.cluster)
	for _, queue := range []string{"work", "other"} {
		fresh, err := q.EnqueueNew(ctx, ref, queue, 1, time.Time{})
		require.NoError(t, err)
		require.True(t, fresh)
		fresh, err = q.EnqueueNew(ctx, ref, queue, 1, time.Time{})
		require.NoError(t, err)
		require.False(t, fresh)
	}
	members, err := rdb.SMembers(ctx, allQueues).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"work", "other"}, members)
	info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo("other", TaskID(ref, 1))
	require.NoError(t, err)
	require.Equal(t, asynq.TaskStatePending, info.State)
}
