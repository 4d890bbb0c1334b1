package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// dagSpec builds an n-node layered DAG where each node depends on up to
// three nodes of earlier layers.
func dagSpec(id string, n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, seed))
	var nodes []string
	for i := 0; i < n; i++ {
		var deps []string
		if i >= 5 {
			for k := 0; k < 1+rng.IntN(3); k++ {
				d := fmt.Sprintf("%q", fmt.Sprintf("n%02d", rng.IntN(i)))
				if !strings.Contains(strings.Join(deps, ","), d) {
					deps = append(deps, d)
				}
			}
		}
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%02d","kind":"work","deps":[%s]}`, i, strings.Join(deps, ",")))
	}
	return fmt.Sprintf(`{"id":%q,"nodes":[%s]}`, id, strings.Join(nodes, ","))
}

func TestDAGSurvivesWorkerKilledMidNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	victimHolds := make(chan string, 1)
	rec.block = func(ctx context.Context, task *runner.Task) error {
		if task.Lease.Owner == "w0" {
			select { // the victim takes one node and never finishes it
			case victimHolds <- task.Lease.Node:
			default:
			}
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	}
	victim := b.worker(b.fastConfig("w0"), map[string]runner.Kind{"work": rec})
	id := b.submit(dagSpec("dag50", 50, 7))
	held := recv(t, victimHolds, 10*time.Second)
	for i := 1; i < 4; i++ {
		b.worker(b.fastConfig(fmt.Sprintf("w%d", i)), map[string]runner.Kind{"work": rec})
	}
	victim.Kill()

	info := b.waitRun(id, 60*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Len(t, info.Nodes, 50)
	for _, n := range info.Nodes {
		require.Equal(t, "SUCCEEDED", n.State, n.ID)
		var res struct{ By string }
		require.NoError(t, json.Unmarshal(n.Result, &res))
		require.NotEqual(t, "w0", res.By, "node %s: the killed worker's result must not be stored", n.ID)
	}
	evs := b.events(id)
	committed := countEvents(evs, "committed")
	require.Len(t, committed, 50)
	for node, c := range committed {
		require.Equal(t, 1, c, "node %s committed %d times", node, c)
	}
	var takeover bool
	for _, e := range evs {
		if e.Type == "takeover" && e.Node == held {
			takeover = true
			require.Equal(t, "w0", e.Details["prev_owner"])
		}
	}
	require.True(t, takeover, "no takeover event for %s, which the killed worker held", held)
}

func TestDuplicateDeliveryIsAckedWithoutRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		started <- struct{}{}
		<-release
		return nil
	}
	m := runner.NewMetrics(nil)
	cfg := b.fastConfig("w1")
	cfg.Metrics = m
	b.worker(cfg, map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"dup","nodes":[{"id":"a","kind":"work"}]}`)
	recv(t, started, 10*time.Second)

	// A second delivery of the same node while its owner runs it, as an
	// at-least-once queue may make.
	ac := asynq.NewClientFromRedisClient(b.rdb)
	defer ac.Close()
	payload := `{"thread":"dup","run":"dup","node":"a"}`
	_, err := ac.Enqueue(asynq.NewTask(runner.TaskType, []byte(payload)), asynq.TaskID("dup:a:extra"))
	require.NoError(t, err)
	waitFor(t, 10*time.Second, "the duplicate to be refused", func() bool {
		return counterValue(t, m.Claims.WithLabelValues("busy")) == 1
	})
	close(release)

	info := b.waitRun(id, 10*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Equal(t, 1, rec.count("a"), "the handler ran for the duplicate delivery")
	evs := b.events(id)
	require.Equal(t, 1, countEvents(evs, "claimed")["a"])
	require.Equal(t, 1, countEvents(evs, "committed")["a"])
}

func TestPoisonTaskIsArchivedAndWorkGoesOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"work": rec})

	ac := asynq.NewClientFromRedisClient(b.rdb)
	defer ac.Close()
	for i, p := range []string{`not json`, `{"thread":"x{y}","run":"r","node":"n"}`, `{}`} {
		_, err := ac.Enqueue(asynq.NewTask(runner.TaskType, []byte(p)), asynq.TaskID(fmt.Sprintf("poison-%d", i)))
		require.NoError(t, err)
	}
	id := b.submit(`{"id":"ok","nodes":[{"id":"a","kind":"work"},{"id":"b","kind":"work","deps":["a"]}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(id, 10*time.Second).Status)

	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	waitFor(t, 10*time.Second, "the poison tasks to be archived", func() bool {
		q, err := insp.GetQueueInfo("default")
		return err == nil && q.Archived == 3
	})
	archived, err := insp.ListArchivedTasks("default")
	require.NoError(t, err)
	for _, a := range archived {
		require.Contains(t, a.LastErr, "payload", "archived task %s should say what was wrong", a.ID)
	}
}

func TestPanicFailsTheAttemptAndTheWorkerLivesOn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var panics atomic.Int32
	boom := runner.KindFunc(func(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
		panics.Add(1)
		panic("boom at " + t.Lease.Node)
	})
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"boom": boom, "work": newRecorder()})
	id := b.submit(`{"id":"p","nodes":[{"id":"a","kind":"boom","max_attempts":2},{"id":"b","kind":"work","deps":["a"]}]}`)
	info := b.waitRun(id, 15*time.Second)
	require.Equal(t, "FAILED", info.Status)
	require.Equal(t, "FAILED", info.Nodes[0].State)
	require.Contains(t, info.Nodes[0].Error, "panic in boom handler: boom at a")
	require.Equal(t, int64(2), info.Nodes[0].Attempt)
	require.Equal(t, "CANCELLED", info.Nodes[1].State)
	require.Equal(t, int32(2), panics.Load())

	// The worker still runs other work.
	id2 := b.submit(`{"id":"after","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(id2, 10*time.Second).Status)
}

// A kind no worker registered is not failed by the workers that lack it:
// they refuse the claim without counting an attempt, and the node waits
// READY, saying why, for a worker that has the kind.
func TestUnknownKindWaitsInsteadOfFailing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.fastConfig("w1")
	cfg.Metrics = runner.NewMetrics(nil)
	b.worker(cfg, map[string]runner.Kind{"work": newRecorder()})
	id := b.submit(`{"id":"u","nodes":[{"id":"a","kind":"nope","max_attempts":5}]}`)
	waitFor(t, 10*time.Second, "the delivery to be refused and redelivered", func() bool {
		return counterValue(t, cfg.Metrics.Claims.WithLabelValues("wrong_kind")) >= 2
	})
	info, err := b.client.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "RUNNING", info.Status)
	n := info.Nodes[0]
	require.Equal(t, "READY", n.State)
	require.Zero(t, n.Attempt)
	require.Zero(t, n.Epoch)
	require.Equal(t, "waiting: no runner serves kind nope on queue default", n.Waiting)
}

func TestGracefulShutdownReleasesForAnotherWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	started := make(chan string, 4)
	rec.block = func(ctx context.Context, task *runner.Task) error {
		if task.Lease.Owner == "w1" {
			started <- task.Lease.Node
			<-ctx.Done() // a long node that stops at a safe point when told
			return context.Cause(ctx)
		}
		return nil
	}
	cfg := b.fastConfig("w1")
	cfg.LeaseTTL, cfg.HeartbeatInterval = time.Minute, 10*time.Second // expiry cannot be what recovers it
	w1 := b.worker(cfg, map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"drain","nodes":[{"id":"long","kind":"work"}]}`)
	recv(t, started, 10*time.Second)

	cfg2 := b.fastConfig("w2")
	cfg2.LeaseTTL, cfg2.HeartbeatInterval = time.Minute, 10*time.Second
	b.worker(cfg2, map[string]runner.Kind{"work": rec})
	begin := time.Now()
	w1.Shutdown()

	info := b.waitRun(id, 20*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Less(t, time.Since(begin), 30*time.Second, "finished by lease expiry, not by release")
	require.Equal(t, "w2", info.Nodes[0].Owner)
	evs := b.events(id)
	require.Equal(t, 1, countEvents(evs, "released")["long"])
	require.Equal(t, 0, countEvents(evs, "failed")["long"], "a release is not a failed attempt")
}

// With several dispatch loops a drain is as with one: every loop stops
// fetching, each running node (whichever loop delivered it) is released,
// and another worker finishes them all, none by lease expiry.
func TestGracefulShutdownWithSeveralDispatchers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	const nodes = 6
	started := make(chan string, nodes)
	rec.block = func(ctx context.Context, task *runner.Task) error {
		if task.Lease.Owner == "w1" {
			started <- task.Lease.Node
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	}
	cfg := b.fastConfig("w1")
	cfg.Concurrency, cfg.Dispatchers = nodes, 3
	cfg.LeaseTTL, cfg.HeartbeatInterval = time.Minute, 10*time.Second // expiry cannot be what recovers them
	w1 := b.worker(cfg, map[string]runner.Kind{"work": rec})
	spec := `{"id":"drain3","nodes":[`
	for i := range nodes {
		if i > 0 {
			spec += ","
		}
		spec += fmt.Sprintf(`{"id":"n%d","kind":"work"}`, i)
	}
	id := b.submit(spec + "]}")
	for range nodes {
		recv(t, started, 10*time.Second)
	}

	cfg2 := b.fastConfig("w2")
	cfg2.LeaseTTL, cfg2.HeartbeatInterval = time.Minute, 10*time.Second
	b.worker(cfg2, map[string]runner.Kind{"work": rec})
	begin := time.Now()
	w1.Shutdown()

	info := b.waitRun(id, 20*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Less(t, time.Since(begin), 30*time.Second, "finished by lease expiry, not by release")
	released := countEvents(b.events(id), "released")
	for _, n := range info.Nodes {
		require.Equal(t, "w2", n.Owner, n.ID)
		require.Equal(t, 1, released[n.ID], n.ID)
	}
}

func TestCancelStopsARunningNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"c","nodes":[{"id":"a","kind":"work"},{"id":"b","kind":"work","deps":["a"]}]}`)
	recv(t, started, 10*time.Second)
	_, err := b.client.Cancel(context.Background(), id, "test")
	require.NoError(t, err)
	require.ErrorIs(t, recv(t, causes, 10*time.Second), runner.ErrRunCancelled)
	info := b.waitRun(id, 10*time.Second)
	require.Equal(t, "CANCELLED", info.Status)
	require.Equal(t, "CANCELLED", info.Nodes[0].State)
	require.Equal(t, "CANCELLED", info.Nodes[1].State)
	require.Equal(t, 1, rec.count("a"))
	require.Equal(t, 0, rec.count("b"))
}

// Asynq's own recoverer redelivers a task whose Asynq lease expired (its
// worker looked dead to Asynq) while baton's lease is still held: the
// redelivery is acked without running the handler, and the owner's commit
// still counts.
func TestAsynqRecovererRedeliveryIsAckedWithoutRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		started <- struct{}{}
		<-release
		return nil
	}
	m := runner.NewMetrics(nil) // shared: either worker may get the redelivery
	cfg1 := b.fastConfig("w1")
	cfg1.Metrics = m
	b.worker(cfg1, map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"rec","nodes":[{"id":"a","kind":"work"}]}`)
	recv(t, started, 10*time.Second)

	// Make Asynq believe w1 died a minute ago: its lease on the task ran out.
	// A new server's recoverer runs at start and redelivers the task.
	require.NoError(t, b.rdb.ZAdd(context.Background(), "asynq:{default}:lease",
		redis.Z{Score: 0, Member: runner.TaskID(fence.NodeRef{Thread: "rec", Run: "rec", Node: "a"}, 1)}).Err())
	cfg2 := b.fastConfig("w2")
	cfg2.Metrics = m
	b.worker(cfg2, map[string]runner.Kind{"work": rec})
	waitFor(t, 15*time.Second, "the redelivery to be refused", func() bool {
		return counterValue(t, m.Claims.WithLabelValues("busy")) >= 1
	})
	close(release)

	info := b.waitRun(id, 10*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Equal(t, "w1", info.Nodes[0].Owner)
	require.Equal(t, 1, rec.count("a"), "the redelivered task ran the handler again")
	require.Equal(t, 1, countEvents(b.events(id), "committed")["a"])
}

// A node that works for several lease TTLs keeps its lease through
// heartbeats: no takeover, one attempt, progress stored on the way.
func TestLongNodeOutlivesManyLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.fastConfig("w1")
	b.worker(cfg, map[string]runner.Kind{"sleep": kinds.Sleep()})
	b.worker(b.fastConfig("w2"), map[string]runner.Kind{"sleep": kinds.Sleep()}) // a would-be taker
	id := b.submit(`{"id":"long","nodes":[{"id":"a","kind":"sleep","input":{"duration":"4s"}}]}`)
	info := b.waitRun(id, 30*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Equal(t, int64(1), info.Nodes[0].Attempt)
	require.Equal(t, int64(1), info.Nodes[0].Epoch, "4s of work under a %s lease needed no second claim", cfg.LeaseTTL)
	evs := b.events(id)
	require.Empty(t, countEvents(evs, "takeover"))
	require.Empty(t, countEvents(evs, "heartbeat_lost"))
	require.GreaterOrEqual(t, countEvents(evs, "progress")["a"], 3, "progress reported with the heartbeats")
}

// Runs that end, by a worker's commit or a client's cancel, get the
// retention as their keys' time to live from the sweepers; a run that
// SUCCEEDED is packed into one key with it, and still reads the same.
func TestFinishedRunsExpireAfterTheRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := b.fastConfig("w1")
	cfg.Retention = time.Hour
	b.worker(cfg, map[string]runner.Kind{"work": newRecorder()})
	id := b.submit(`{"id":"ret","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(id, 10*time.Second).Status)
	threaded := b.submit(`{"id":"ret-t","thread":"th-ret","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(threaded, 10*time.Second).Status)
	wide := b.submit(`{"id":"ret3","nodes":[{"id":"a","kind":"work"},{"id":"b","kind":"work"}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun(wide, 10*time.Second).Status)
	cancelled := b.submit(`{"id":"ret2","nodes":[{"id":"a","kind":"work","queue":"idle"}]}`)
	_, err := b.client.Cancel(context.Background(), cancelled, "test")
	require.NoError(t, err)

	keys := fence.Keys{}
	for _, key := range []string{keys.Packed("ret", "ret"), keys.Packed("th-ret", "ret-t"), keys.Packed("ret3", "ret3"),
		keys.Run("ret2", "ret2"), keys.Node("ret2", "ret2", "a"), keys.Locator("ret-t")} {
		waitFor(t, 10*time.Second, "the retention of "+key, func() bool {
			ttl, err := b.rdb.TTL(context.Background(), key).Result()
			return err == nil && ttl > 59*time.Minute && ttl <= time.Hour
		})
	}
	for _, run := range []string{id, threaded, wide} {
		st, err := b.client.Status(context.Background(), run)
		require.NoError(t, err)
		require.Equal(t, "SUCCEEDED", st.Status, "%s: a packed run reads as before", run)
	}
}

// A chain runs in one delivery: each commit claims the next node for the
// same worker. A successor on a queue the worker does not serve goes
// through Asynq to a worker that does.
func TestChainContinuesWithoutTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := newRecorder()
	m := runner.NewMetrics(nil)
	cfg := b.fastConfig("w1")
	cfg.Metrics = m
	b.worker(cfg, map[string]runner.Kind{"work": rec})
	other := b.fastConfig("w2")
	other.Queues = map[string]int{"other": 1}
	b.worker(other, map[string]runner.Kind{"work": rec})

	id := b.submit(`{"id":"chain","nodes":[{"id":"a","kind":"work"},{"id":"b","kind":"work","deps":["a"]},` +
		`{"id":"c","kind":"work","deps":["b"]},{"id":"d","kind":"work","deps":["c"]},` +
		`{"id":"e","kind":"work","deps":["d"],"queue":"other"}]}`)
	info := b.waitRun(id, 15*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	owners := map[string]string{}
	for _, n := range info.Nodes {
		owners[n.ID] = n.Owner
		require.Equal(t, int64(1), n.Epoch, n.ID)
	}
	require.Equal(t, map[string]string{"a": "w1", "b": "w1", "c": "w1", "d": "w1", "e": "w2"}, owners)
	require.Equal(t, 1.0, counterValue(t, m.Claims.WithLabelValues("claimed")), "one delivery started the chain")
	require.Equal(t, 3.0, counterValue(t, m.Claims.WithLabelValues("continued")))
	committed := countEvents(b.events(id), "committed")
	require.Len(t, committed, 5)
	for node, n := range committed {
		require.Equal(t, 1, n, node)
	}
}

// A delivery that Asynq counts as taken but nobody runs (its dequeue's
// reply was lost, or its server hangs before claiming) does not hold the
// node for Asynq's task lease: the sweeper finds the node due, sees its
// task active, and delivers it again under another id.
func TestDequeuedButNeverClaimedIsDeliveredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	taken := make(chan struct{}, 1)
	unblock := make(chan struct{})
	hole := asynq.NewServerFromRedisClient(b.rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{"default": 1},
		LogLevel: asynq.FatalLevel})
	require.NoError(t, hole.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		taken <- struct{}{}
		<-unblock // holds the task, never claims
		return nil
	})))
	t.Cleanup(func() { close(unblock); hole.Shutdown() })

	id := b.submit(`{"id":"hole","nodes":[{"id":"a","kind":"noop"}]}`)
	recv(t, taken, 10*time.Second)
	m := runner.NewMetrics(nil)
	cfg := b.fastConfig("w1")
	cfg.Metrics = m
	b.worker(cfg, map[string]runner.Kind{"noop": kinds.Noop()})

	info := b.waitRun(id, 15*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Equal(t, "w1", info.Nodes[0].Owner)
	require.Equal(t, int64(1), info.Nodes[0].Attempt, "a redelivery is not a new attempt")
	require.GreaterOrEqual(t, counterValue(t, m.SweeperActions.WithLabelValues("stale_ready_redelivered")), 1.0)
}
