package runner_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// tripCounter counts round trips: a command or a pipeline is one, but
// for what go-redis sends on a connection it has just dialed (HELLO,
// CLIENT SETINFO) and the listing of live runners that Submit reads at
// most once a second for its warnings (ZRANGE; no runner is live here).
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "zrange" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			c.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// countingClient is a runner.Client whose round trips are counted.
func countingClient(t *testing.T, b *testBundle) (*runner.Client, *tripCounter) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: b.srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	trips := &tripCounter{}
	rdb.AddHook(trips)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, trips
}

// submitCounted submits spec and returns the run id and the round trips
// the submit took.
func submitCounted(t *testing.T, c *runner.Client, trips *tripCounter, spec string) (string, int64) {
	t.Helper()
	s, err := runner.ParseSpec([]byte(spec))
	require.NoError(t, err)
	before := trips.n.Load()
	res, err := c.Submit(context.Background(), s)
	require.NoError(t, err)
	return res.RunID, trips.n.Load() - before
}

// noSweepConfig is a worker whose sweeper would deliver a forgotten READY
// node only after an hour: a node that runs was delivered by its submit.
func noSweepConfig(b *testBundle, id string) runner.WorkerConfig {
	cfg := b.fastConfig(id)
	cfg.ReadyThreshold = time.Hour
	return cfg
}

// A run without a thread is stored and its first node enqueued in one
// round trip; each further ready node costs Asynq's own enqueue. Every
// node is delivered by the submit, none by the sweeper.
func TestSubmitCarriesTheFirstEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, trips := countingClient(t, b)
	rec := newRecorder()

	// The first submit on a client goes alone, caching the submit script,
	// and registers the queue with Asynq (SADD, once per client and queue).
	submitCounted(t, c, trips, `{"nodes":[{"id":"warm","kind":"work"}]}`)
	submitCounted(t, c, trips, `{"thread":"warm","nodes":[{"id":"warm","kind":"work"}]}`) // loads locator.lua

	one, rt := submitCounted(t, c, trips, `{"id":"one-node","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, int64(1), rt, "a one-node run: the submit script and Asynq's enqueue in one round trip")

	wide, rt := submitCounted(t, c, trips, `{"id":"wide","nodes":[
		{"id":"a","kind":"work"},{"id":"b","kind":"work"},{"id":"c","kind":"work"},
		{"id":"d","kind":"work","deps":["a","b","c"]}]}`)
	require.Equal(t, int64(3), rt, "three ready nodes: the first carried by the submit, two enqueues after")

	turn, rt := submitCounted(t, c, trips, `{"id":"turn-1","thread":"chat","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, int64(2), rt, "a run of an idle thread: its id claimed and the thread read, then one round trip")

	again, rt := submitCounted(t, c, trips, `{"id":"one-node","nodes":[{"id":"a","kind":"work"}]}`)
	require.Equal(t, one, again)
	require.Equal(t, int64(1), rt, "a resubmit: one round trip too (its node's task is there already)")

	b.worker(noSweepConfig(b, "tripper"), map[string]runner.Kind{"work": rec})
	for _, id := range []string{one, wide, turn} {
		info := b.waitRun(id, 10*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, "run %s: %+v", id, info.Nodes)
	}
	for _, node := range []string{"b", "c", "d"} {
		require.Equal(t, 1, rec.count(node), "node %s of the wide run ran once", node)
	}
	require.Equal(t, 3, rec.count("a"), "node a ran once in each run")
}

// A submit sent with its enqueue while Redis has forgotten its scripts (a
// restart, SCRIPT FLUSH) is sent again alone, after Asynq's enqueue has
// gone again alone too: the node's task comes before its node. Here the
// worker takes that task and finds nothing to claim while the submit is
// held, and its acknowledgement is held until the submit has returned:
// the task is still Asynq's, under the id a first delivery has. The node
// is enqueued again under an id of its own and runs, not waiting for the
// sweeper (an hour here).
func TestSubmitCarryAfterScriptFlush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	names := redistest.ScriptNames(t)
	rdb := redis.NewClient(&redis.Options{Addr: b.srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	gate := newCmdGate() // holds a submit sent again alone
	rdb.AddHook(gate)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	wrdb := redis.NewClient(&redis.Options{Addr: b.srv.Addr()})
	t.Cleanup(func() { _ = wrdb.Close() })
	acks := newCmdGate() // holds an acknowledgement
	wrdb.AddHook(acks)
	cfg := noSweepConfig(b, "flushed")
	cfg.Redis = wrdb
	b.worker(cfg, map[string]runner.Kind{"work": newRecorder()})
	// A test that fails midway lets whatever is held go before the
	// worker is shut down.
	t.Cleanup(func() { close(gate.release); close(acks.release) })

	submit := func(spec string) (runner.Submitted, error) {
		s, err := runner.ParseSpec([]byte(spec))
		require.NoError(t, err)
		return c.Submit(context.Background(), s)
	}
	for i := range 3 {
		// A run the client submits alone, its script cached, before the
		// next goes with its enqueue (a client carries only once it has
		// seen its script run).
		warm, err := submit(fmt.Sprintf(`{"id":"warm-%d","nodes":[{"id":"a","kind":"work"}]}`, i))
		require.NoError(t, err)
		require.Equal(t, "SUCCEEDED", b.waitRun(warm.RunID, 10*time.Second).Status)

		id := fmt.Sprintf("flushed-%d", i)
		task := runner.TaskID(fence.NodeRef{Thread: id, Run: id, Node: "a"}, 1)
		acks.arm(func(cmd redis.Cmder) bool { // Asynq's script, the task id first
			name := cmd.Name()
			return (name == "evalsha" || name == "eval") && scriptOf(names, cmd) == "" && scriptArg0(cmd) == task
		})
		require.NoError(t, b.rdb.ScriptFlush(context.Background()).Err())
		gate.arm(func(cmd redis.Cmder) bool { return cmd.Name() == "eval" && scriptOf(names, cmd) == "submit" })
		type submitted struct {
			res runner.Submitted
			err error
		}
		done := make(chan submitted, 1)
		go func() {
			res, err := submit(fmt.Sprintf(`{"id":%q,"nodes":[{"id":"a","kind":"work"}]}`, id))
			done <- submitted{res, err}
		}()
		recv(t, gate.held, 10*time.Second) // the task is in the queue, its node is not stored
		recv(t, acks.held, 10*time.Second) // the worker found nothing to claim
		gate.release <- struct{}{}
		got := recv(t, done, 10*time.Second)
		acks.release <- struct{}{}
		require.NoError(t, got.err)

		info := b.waitRun(got.res.RunID, 10*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, "run %s: %+v", got.res.RunID, info.Nodes)
		require.Equal(t, int64(1), info.Nodes[0].Attempt, "run %s: delivered again, claimed once", got.res.RunID)
	}
}

// cmdGate is a go-redis hook that holds the first command sent alone
// (not in a pipeline) that the function it was armed with accepts, until
// the test releases it; it is armed again for each command to hold.
type cmdGate struct {
	want    atomic.Pointer[func(redis.Cmder) bool]
	held    chan struct{}
	release chan struct{}
}

func newCmdGate() *cmdGate {
	return &cmdGate{held: make(chan struct{}, 1), release: make(chan struct{})}
}

func (g *cmdGate) arm(match func(redis.Cmder) bool) { g.want.Store(&match) }

func (g *cmdGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *cmdGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if want := g.want.Load(); want != nil && (*want)(cmd) && g.want.CompareAndSwap(want, nil) {
			g.held <- struct{}{}
			<-g.release
		}
		return next(ctx, cmd)
	}
}

func (g *cmdGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// scriptOf names the baton script an EVALSHA or EVAL runs ("" for
// another script, or another command).
func scriptOf(names map[string]string, cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	s, _ := args[1].(string)
	switch cmd.Name() {
	case "evalsha":
		return names[s]
	case "eval":
		return names[fmt.Sprintf("%x", sha1.Sum([]byte(s)))]
	}
	return ""
}

// scriptArg0 is the first argument (after the keys) of an EVALSHA or EVAL.
func scriptArg0(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 3 {
		return ""
	}
	nkeys, _ := args[2].(int)
	if len(args) <= 3+nkeys {
		return ""
	}
	s, _ := args[3+nkeys].(string)
	return s
}

// ackWatch is a go-redis hook that sees the pipelines a commit goes in:
// with the task's acknowledgement (an EVALSHA of Asynq's whose first
// argument is the task id), or alone. With loseFirst set it loses the
// reply of the first pipeline that carries a commit after Redis ran it.
type ackWatch struct {
	names     map[string]string // script SHA1 -> baton script name
	loseFirst bool

	carried atomic.Int64 // commits sent in one pipeline with an acknowledgement
	lost    atomic.Int64
}

func (a *ackWatch) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (a *ackWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (a *ackWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if len(cmds) != 2 || scriptOf(a.names, cmds[0]) != "commit" {
			return err
		}
		if cmds[1].Name() != "evalsha" || scriptOf(a.names, cmds[1]) != "" || scriptArg0(cmds[1]) == "" {
			return err
		}
		if cmds[0].Err() == nil { // the acknowledgement may meet NOSCRIPT: Asynq sends it again alone
			a.carried.Add(1)
		}
		if a.loseFirst && a.lost.CompareAndSwap(0, 1) {
			for _, c := range cmds {
				c.SetErr(errReplyLost)
			}
			return errReplyLost
		}
		return err
	}
}

// watchedWorker starts a worker whose Redis client is watched by a. It
// takes no node from the queue (NoTake): a commit that tries to take one
// goes alone, and these tests count the commits that do not.
func watchedWorker(t *testing.T, b *testBundle, a *ackWatch, kinds map[string]runner.Kind) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: b.srv.Addr(), MaxRetries: -1})
	rdb.AddHook(a)
	t.Cleanup(func() { _ = rdb.Close() })
	cfg := noSweepConfig(b, "acker")
	cfg.Redis, cfg.NoTake = rdb, true
	b.worker(cfg, kinds)
}

// The commit of a node with no dependents goes to Redis with Asynq's
// acknowledgement of its task, one round trip for both: every such node
// of one-node runs and of a fan-out is committed that way, once, and
// Asynq's queue is left empty.
func TestCommitGoesWithTheAcknowledgement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	watch := &ackWatch{names: redistest.ScriptNames(t)}
	rec := newRecorder()
	watchedWorker(t, b, watch, map[string]runner.Kind{"work": rec})

	var ids []string
	for i := range 5 {
		ids = append(ids, b.submit(fmt.Sprintf(`{"id":"ack-one-%d","nodes":[{"id":"a","kind":"work"}]}`, i)))
	}
	ids = append(ids, b.submit(`{"id":"ack-wide","nodes":[
		{"id":"root","kind":"work"},
		{"id":"x","kind":"work","deps":["root"]},{"id":"y","kind":"work","deps":["root"]},
		{"id":"z","kind":"work","deps":["root"]}]}`))
	for _, id := range ids {
		info := b.waitRun(id, 10*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, "run %s: %+v", id, info.Nodes)
		for _, n := range info.Nodes {
			require.Equal(t, int64(1), n.Attempt, "%s/%s", id, n.ID)
		}
	}
	// root has dependents: its commit enqueues them and goes alone. The
	// hook counts a pipeline once its reply is read, after the run ended.
	waitFor(t, 5*time.Second, "8 commits carried by their acknowledgement", func() bool {
		return watch.carried.Load() == 5+3
	})
	for _, node := range []string{"root", "x", "y", "z"} {
		require.Equal(t, 1, rec.count(node), "node %s ran once", node)
	}
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	waitFor(t, 10*time.Second, "Asynq's queue empty", func() bool {
		q, err := insp.GetQueueInfo("default")
		return err == nil && q.Size == 0
	})
}

// A lost reply of the round trip that carried a commit and its task's
// acknowledgement costs nothing: the commit is retried alone with the
// same claim and recognised, the node ran once and committed once at
// epoch 1.
func TestLostAcknowledgementReplyCostsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	watch := &ackWatch{names: redistest.ScriptNames(t), loseFirst: true}
	rec := newRecorder()
	watchedWorker(t, b, watch, map[string]runner.Kind{"work": rec})

	id := b.submit(`{"id":"ack-lost","nodes":[{"id":"a","kind":"work"}]}`)
	info := b.waitRun(id, 10*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)
	require.Equal(t, int64(1), watch.lost.Load(), "the carrying round trip's reply was lost")
	require.Equal(t, int64(1), info.Nodes[0].Attempt)
	require.Equal(t, int64(1), info.Nodes[0].Epoch)
	require.Equal(t, map[string]int{"a": 1}, countEvents(b.events(id), "committed"))
	require.Equal(t, 1, rec.count("a"))
}
