package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// The thread contract, one test per defect a review found in the multitask
// strategies and checkpoints (issue 29), each through the Go client and
// the store a Go program embeds, on a real redis-server. Node attempts
// are driven by hand (claim, save, end) so each interleaving is exact.

// threadBundle is a testBundle with a store for node attempts.
type threadBundle struct {
	*testBundle
	store *fence.Store
}

func threadSetup(t *testing.T, opt *fence.Options) *threadBundle {
	t.Helper()
	b := setup(t)
	return &threadBundle{testBundle: b, store: fence.New(b.rdb, opt)}
}

// run submits a one-node run ("n", kind step) and returns what Submit said.
func (b *threadBundle) run(id, thread, multitask string) (runner.Submitted, error) {
	b.t.Helper()
	spec := map[string]any{"id": id, "nodes": []any{map[string]any{"id": "n", "kind": "step"}}}
	if thread != "" {
		spec["thread"] = thread
	}
	if multitask != "" {
		spec["multitask"] = multitask
	}
	raw, _ := json.Marshal(spec)
	s, err := runner.ParseSpec(raw)
	if err != nil {
		return runner.Submitted{}, err
	}
	return b.client.Submit(context.Background(), s)
}

// claim takes run's node for worker w.
func (b *threadBundle) claim(thread, run, w string, ttl time.Duration) *fence.Claimed {
	b.t.Helper()
	c, err := b.store.Claim(context.Background(), fence.NodeRef{Thread: thread, Run: run, Node: "n"}, w, ttl, 10*time.Millisecond)
	require.NoError(b.t, err, "claim %s/%s", thread, run)
	return c
}

// save stores {"by": id} under checkpoint id in namespace "state".
func (b *threadBundle) save(l fence.Lease, id string) (fence.Checkpoint, error) {
	return b.store.SaveCheckpoint(context.Background(), l, fence.CheckpointWrite{NS: "state", ID: id,
		Data: json.RawMessage(fmt.Sprintf(`{"by":%q}`, id))})
}

// mustRun is run that must be accepted.
func (b *threadBundle) mustRun(id, thread, multitask string) runner.Submitted {
	b.t.Helper()
	s, err := b.run(id, thread, multitask)
	require.NoError(b.t, err, "submit %s", id)
	return s
}

// mustSave is save that must be accepted.
func (b *threadBundle) mustSave(l fence.Lease, id string) fence.Checkpoint {
	b.t.Helper()
	cp, err := b.save(l, id)
	require.NoError(b.t, err, "save %s", id)
	return cp
}

// end ends l's attempt: "commit", or "release" (as a run answering its
// cancel does).
func (b *threadBundle) end(l fence.Lease, how string) {
	b.t.Helper()
	var err error
	if how == "commit" {
		_, err = b.store.Commit(context.Background(), l, []byte(`1`), nil)
	} else {
		_, err = b.store.Release(context.Background(), l, "cancelled")
	}
	require.NoError(b.t, err, "%s %s", how, l)
}

// latest is the id of the thread's latest checkpoint ("" when none).
func (b *threadBundle) latest(thread string) string {
	b.t.Helper()
	cp, err := b.store.LatestCheckpoint(context.Background(), thread, "state")
	if err != nil {
		require.ErrorIs(b.t, err, fence.ErrNoCheckpoint)
		return ""
	}
	return cp.ID
}

// promote is the promotion any caller (a worker, the sweeper) makes.
func (b *threadBundle) promote(thread string) string {
	b.t.Helper()
	p, err := b.store.Promote(context.Background(), thread, "test")
	require.NoError(b.t, err)
	if p == nil {
		return ""
	}
	return p.Run
}

func (b *threadBundle) status(run string) string {
	b.t.Helper()
	info, err := b.client.Status(context.Background(), run)
	require.NoError(b.t, err)
	return info.Status
}

// 1a. r1 runs; the user sends a rollback, then an interrupt: the queue is
// [int rb]. r1 is rolled back as soon as it ended, before int starts: int
// starts from the state before r1, and rb, started after int, removes
// nothing of int's.
func TestRollbackTargetsTheRunItWasSubmittedAgainst(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("r0", "chat", "enqueue")
	r0 := b.claim("chat", "r0", "w", time.Minute)
	b.mustSave(r0.Lease, "cp-r0")
	b.end(r0.Lease, "commit")

	b.mustRun("r1", "chat", "enqueue")
	r1 := b.claim("chat", "r1", "w", time.Minute)
	b.mustSave(r1.Lease, "cp-r1")

	rb, err := b.run("rb", "chat", "rollback")
	require.NoError(t, err)
	require.Equal(t, "QUEUED", rb.Status)
	require.Equal(t, "r1", rb.Behind)
	info, err := b.client.Status(ctx, "r1")
	require.NoError(t, err)
	require.True(t, info.Cancelled, "cancelled by the submit itself")
	in, err := b.run("int", "chat", "interrupt")
	require.NoError(t, err)
	require.Equal(t, "QUEUED", in.Status)

	// r1 was cancelled by the submits themselves; it saves its state as it
	// answers the cancel, and ends.
	b.mustSave(r1.Lease, "cp-r1-last")
	b.end(r1.Lease, "release")
	require.Equal(t, "CANCELLED", b.status("r1"))

	require.Equal(t, "int", b.promote("chat"))
	require.Equal(t, "cp-r0", b.latest("chat"), "int starts from the state before r1")
	ic := b.claim("chat", "int", "w", time.Minute)
	b.mustSave(ic.Lease, "cp-int")
	b.end(ic.Lease, "commit")

	require.Equal(t, "rb", b.promote("chat"))
	require.Equal(t, "cp-int", b.latest("chat"), "rb removes nothing of int's")
}

// 1b. While a rollback waits behind a running run, promotion attempts (the
// sweeper makes one every ready threshold) change nothing: the running
// run's checkpoints stay.
func TestRollbackWaitingBehindARunningRunDeletesNothing(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	b.mustRun("r1", "chat", "enqueue")
	r1 := b.claim("chat", "r1", "w", time.Minute)
	b.mustSave(r1.Lease, "cp-r1")
	b.mustRun("rb", "chat", "rollback")
	for range 3 {
		require.Empty(t, b.promote("chat"), "r1 is still running")
		require.Equal(t, "cp-r1", b.latest("chat"))
	}
	// r1 still owns the thread's state while it finishes.
	b.mustSave(r1.Lease, "cp-r1-2")
}

// 1c. A rollback run cancelled while queued removes nothing when the run it
// targeted ends.
func TestWithdrawnRollbackDeletesNothing(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("r1", "chat", "enqueue")
	r1 := b.claim("chat", "r1", "w", time.Minute)
	b.mustSave(r1.Lease, "cp-r1")
	b.mustRun("rb", "chat", "rollback")
	_, err := b.client.Cancel(ctx, "rb", "never mind")
	require.NoError(t, err)
	require.Equal(t, "CANCELLED", b.status("rb"))
	th, err := b.client.Thread(ctx, "chat")
	require.NoError(t, err)
	require.Empty(t, th.Queued, "a withdrawn run no longer waits")
	b.end(r1.Lease, "release")
	require.Empty(t, b.promote("chat"))
	require.Equal(t, "cp-r1", b.latest("chat"), "the withdrawn rollback removed nothing")
}

// 2. A run without a thread is a run of the thread of its own id: a run
// naming that id as its thread waits its turn by its strategy, and a run
// without a thread is refused while the thread of its id is busy.
func TestThreadlessRunIsTheThreadOfItsID(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("chat-1", "", "")
	own := b.claim("chat-1", "chat-1", "w", time.Minute)

	_, err := b.run("x", "chat-1", "reject")
	require.ErrorIs(t, err, fence.ErrThreadBusy)
	_, err = b.client.Status(ctx, "x")
	require.ErrorIs(t, err, fence.ErrNotFound, "nothing stored")
	q, err := b.run("y", "chat-1", "enqueue")
	require.NoError(t, err)
	require.Equal(t, "QUEUED", q.Status)
	require.Equal(t, "chat-1", q.Behind)

	_, err = b.save(own.Lease, "cp-own")
	require.NoError(t, err, "the thread-less run still owns its thread's state")
	b.end(own.Lease, "commit")
	require.Equal(t, "SUCCEEDED", b.status("chat-1"))
	require.Equal(t, "y", b.promote("chat-1"))

	// The reverse: a thread busy with w1 refuses a thread-less run of its id.
	b.mustRun("w1", "other", "enqueue")
	_, err = b.run("other", "", "")
	require.ErrorIs(t, err, fence.ErrThreadBusy, "thread other is running w1")
	_, err = b.client.Status(ctx, "other")
	require.ErrorIs(t, err, fence.ErrNotFound, "nothing stored")

	// Bad input: a strategy without a thread; a thread that is a run of
	// another thread.
	_, err = b.run("z", "", "enqueue")
	require.ErrorIs(t, err, runner.ErrInvalidSpec)
	require.ErrorContains(t, err, "multitask")
	_, err = b.run("z2", "w1", "enqueue")
	require.ErrorIs(t, err, fence.ErrRunConflict)
	require.ErrorContains(t, err, `thread "w1"`)
}

// 3. The rolled-back run may save its last checkpoint and end at any
// moment around the promotion (as it answers the cancel): whatever a
// promoting caller's calls are cut between, the next run starts from the
// state before the rolled-back run. lateEnd makes that save and end
// right after any script the promoter runs that is not the promotion
// itself (a separate deletion was one).
func TestRollbackAndPromotionAreOneStep(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("r1", "chat", "enqueue")
	r1 := b.claim("chat", "r1", "w", time.Minute)
	b.mustSave(r1.Lease, "cp-r1")
	b.mustRun("rb", "chat", "rollback")

	ended := false
	end := func() {
		if ended {
			return
		}
		ended = true
		_, err := b.save(r1.Lease, "cp-r1-last")
		require.NoError(t, err)
		_, err = b.store.Release(ctx, r1.Lease, "cancelled")
		require.NoError(t, err)
	}
	rdb := b.srv.Client(t)
	rdb.AddHook(&lateEnd{names: redistest.ScriptNames(t), end: end})
	promoter := fence.New(rdb, nil)
	p, err := promoter.Promote(ctx, "chat", "test")
	require.NoError(t, err)
	if p == nil { // r1 was still running: nothing happened
		end()
		require.Equal(t, "rb", b.promote("chat"))
	} else {
		require.Equal(t, "rb", p.Run)
	}
	require.Empty(t, b.latest("chat"), "the thread is as before r1: no checkpoint")
}

// lateEnd calls end after the first baton script other than promote.
type lateEnd struct {
	names map[string]string
	end   func()
}

func (h *lateEnd) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *lateEnd) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *lateEnd) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			if name := h.names[fmt.Sprint(args[1])]; name != "" && name != "promote" {
				h.end()
			}
		}
		return err
	}
}

// 4. A run that saved more than the history cap is rolled back to the
// state before it all the same.
func TestRollbackPastTheHistoryCap(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, &fence.Options{CheckpointHistory: 3})
	ctx := context.Background()
	b.mustRun("r0", "chat", "enqueue")
	r0 := b.claim("chat", "r0", "w", time.Minute)
	b.mustSave(r0.Lease, "cp-r0")
	b.end(r0.Lease, "commit")
	b.mustRun("r1", "chat", "enqueue")
	r1 := b.claim("chat", "r1", "w", time.Minute)
	for i := range 5 {
		_, err := b.save(r1.Lease, fmt.Sprintf("cp-r1-%d", i))
		require.NoError(t, err)
	}
	list, _, err := b.store.Checkpoints(ctx, "chat", "state", 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 4, "the newest 3, and r1's anchor")
	b.mustRun("rb", "chat", "rollback")
	b.end(r1.Lease, "release")
	require.Equal(t, "rb", b.promote("chat"))
	require.Equal(t, "cp-r0", b.latest("chat"))
}

// 5. Pending writes belong to the run that stored them: a run that resumed
// from the previous run's checkpoint leaves none there once rolled back.
func TestRollbackRemovesTheRunsPendingWrites(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("r0", "chat", "enqueue")
	r0 := b.claim("chat", "r0", "w", time.Minute)
	b.mustSave(r0.Lease, "cp-r0")
	_, err := b.store.PutWrites(ctx, r0.Lease, "state", "cp-r0", "task-a", []fence.PendingWrite{{Channel: "x", Value: []byte(`"a"`)}})
	require.NoError(t, err)
	b.end(r0.Lease, "commit")

	b.mustRun("r1", "chat", "enqueue")
	r1 := b.claim("chat", "r1", "w", time.Minute)
	_, err = b.store.PutWrites(ctx, r1.Lease, "state", "cp-r0", "task-b", []fence.PendingWrite{{Channel: "x", Value: []byte(`"b"`)}})
	require.NoError(t, err)
	b.mustRun("rb", "chat", "rollback")
	b.end(r1.Lease, "release")
	require.Equal(t, "rb", b.promote("chat"))

	writes, err := b.store.PendingWrites(ctx, "chat", "state", "cp-r0")
	require.NoError(t, err)
	require.Len(t, writes, 1, "r0's write stays, r1's went with its rollback")
	require.Equal(t, "task-a", writes[0].Task)
}

// 6. DeleteCheckpoints refuses while a run without a thread, active on the
// thread of its id, is running.
func TestDeleteCheckpointsRefusesARunningThreadlessRun(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("solo", "", "")
	c := b.claim("solo", "solo", "w", time.Minute)
	b.mustSave(c.Lease, "cp-1")
	_, err := b.store.DeleteCheckpoints(ctx, "solo")
	require.ErrorIs(t, err, fence.ErrThreadBusy)
	require.Equal(t, "cp-1", b.latest("solo"))
	b.end(c.Lease, "commit")
	n, err := b.store.DeleteCheckpoints(ctx, "solo")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// 7. A save, and a release, whose reply was lost, retried after the node
// was taken over, answer as stored: no "stale", no stale_rejected event.
func TestReplayAfterTakeoverIsRecognised(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("solo", "", "")
	first := b.claim("solo", "solo", "w1", 300*time.Millisecond)
	saved, err := b.save(first.Lease, "cp-1") // its reply is "lost"
	require.NoError(t, err)
	var second *fence.Claimed
	waitFor(t, 10*time.Second, "the lease to run out and w2 to take over", func() bool {
		c, err := b.store.Claim(ctx, fence.NodeRef{Thread: "solo", Run: "solo", Node: "n"}, "w2", time.Minute, 10*time.Millisecond)
		second = c
		return err == nil
	})
	require.Equal(t, first.Epoch+1, second.Epoch)
	again, err := b.save(first.Lease, "cp-1")
	require.NoError(t, err, "the retried save was stored the first time")
	require.Equal(t, saved.Version, again.Version)
	require.Empty(t, countEvents(b.events("solo"), "stale_rejected"))

	// The same for a release: w2 releases, w3 claims, w2's retry.
	_, err = b.store.Release(ctx, second.Lease, "shutdown")
	require.NoError(t, err)
	b.claim("solo", "solo", "w3", time.Minute)
	_, err = b.store.Release(ctx, second.Lease, "shutdown")
	require.NoError(t, err, "the retried release was applied the first time")
	require.Empty(t, countEvents(b.events("solo"), "stale_rejected"))
	// A write the old claim never made is still refused.
	_, err = b.save(first.Lease, "cp-2")
	require.True(t, fence.IsFenced(err), "%v", err)
}

// 8. Every retry request is remembered, not only the last: request 1 resent
// after request 2 retried the run again is a replay.
func TestEveryRetryIDIsRemembered(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("job", "", "")
	fail := func() {
		t.Helper()
		c := b.claim("job", "job", "w", time.Minute)
		_, err := b.store.Fail(ctx, c.Lease, fence.Failure{Err: "boom", Final: true}, nil)
		require.NoError(t, err)
		require.Equal(t, "FAILED", b.status("job"))
	}
	fail()
	_, err := b.client.Retry(ctx, "job", "req-1")
	require.NoError(t, err)
	fail()
	_, err = b.client.Retry(ctx, "job", "req-2")
	require.NoError(t, err)
	fail()
	res, err := b.client.Retry(ctx, "job", "req-1")
	require.NoError(t, err)
	require.True(t, res.Replay, "request 1 resent")
	require.Equal(t, "FAILED", b.status("job"), "not retried a third time")
	require.Equal(t, 2, countEvents(b.events("job"), "run_retried")[""])

	// Bad input: a retry of a run that is not failed.
	b.mustRun("fine", "", "")
	_, err = b.client.Retry(ctx, "fine", "req-3")
	require.NoError(t, err, "RUNNING: answered AlreadyRunning")
}

// 9. Every key of a thread's checkpoint state expires together: after the
// retention, a new save numbered 1 again finds no pending write of the old
// version 1.
func TestPendingWritesExpireWithTheirCounter(t *testing.T) {
	t.Parallel()
	// The retention is long beside a loaded machine's stalls: each step
	// below must land within it, and the pending write must come a good
	// part of it after the save.
	b := threadSetup(t, &fence.Options{ThreadRetention: 2 * time.Second})
	ctx := context.Background()
	b.mustRun("r0", "chat", "enqueue")
	r0 := b.claim("chat", "r0", "w", time.Minute)
	cp, err := b.save(r0.Lease, "cp-a")
	require.NoError(t, err)
	require.EqualValues(t, 1, cp.Version)
	time.Sleep(time.Second) // the pending write comes later than the save, by design of the case
	_, err = b.store.PutWrites(ctx, r0.Lease, "state", "cp-a", "task", []fence.PendingWrite{{Channel: "x", Value: []byte(`"old"`)}})
	require.NoError(t, err)
	waitFor(t, 10*time.Second, "the thread's checkpoint state to expire", func() bool {
		n, err := b.rdb.Exists(ctx, b.store.Keys().Checkpoints("chat")).Result()
		require.NoError(t, err)
		return n == 0
	})
	cp, err = b.save(r0.Lease, "cp-b")
	require.NoError(t, err)
	require.EqualValues(t, 1, cp.Version, "the counter expired")
	_, err = b.store.PutWrites(ctx, r0.Lease, "state", "cp-b", "task", []fence.PendingWrite{{Channel: "x", Value: []byte(`"new"`)}})
	require.NoError(t, err)
	writes, err := b.store.PendingWrites(ctx, "chat", "state", "cp-b")
	require.NoError(t, err)
	require.Len(t, writes, 1)
	require.JSONEq(t, `"new"`, string(writes[0].Value), "no write of the old version 1 survives")
}

// A run cancelled while its node runs, then retried at once, runs again:
// the worker that heard the cancel's push does not apply it to the retried
// attempt, claimed after it.
func TestRetryRightAfterACancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	started := make(chan int64, 4)
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"once": runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		started <- task.Lease.Attempt
		if task.Lease.Attempt == 1 {
			<-ctx.Done()
			return nil, context.Cause(ctx)
		}
		return json.RawMessage(`"done"`), nil
	})})
	b.submit(`{"id":"rc","nodes":[{"id":"n","kind":"once"}]}`)
	require.EqualValues(t, 1, recv(t, started, 10*time.Second))
	_, err := b.client.Cancel(ctx, "rc", "")
	require.NoError(t, err)
	require.Equal(t, "CANCELLED", b.waitRun("rc", 10*time.Second).Status)
	_, err = b.client.Retry(ctx, "rc", "")
	require.NoError(t, err)
	info := b.waitRun("rc", 10*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)
}

// A run without a thread is retried only while it is still the active run
// of the thread of its id: once a run of that thread started, re-running
// it would run two of the thread's runs at once.
func TestThreadlessRetryAfterTheThreadMovedOn(t *testing.T) {
	t.Parallel()
	b := threadSetup(t, nil)
	ctx := context.Background()
	b.mustRun("chat", "", "")
	c := b.claim("chat", "chat", "w", time.Minute)
	_, err := b.store.Fail(ctx, c.Lease, fence.Failure{Err: "boom", Final: true}, nil)
	require.NoError(t, err)
	b.mustRun("next", "chat", "enqueue")
	require.Equal(t, "RUNNING", b.status("next"))
	_, err = b.client.Retry(ctx, "chat", "")
	require.ErrorIs(t, err, fence.ErrNotActiveRun)
	require.Equal(t, "FAILED", b.status("chat"), "nothing changed")
}
