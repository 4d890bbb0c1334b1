package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// The graph interrupted on worker A resumes on worker B from A's
// checkpoint, not from scratch, and A's Set after B took over is refused,
// recorded, and changes nothing.
func TestGraphResumesOnAnotherWorkerAndAStaleSetIsRefused(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	o, err := demo(context.Background(), rdb, log, t.Output())
	require.NoError(t, err)
	require.NoError(t, o.check())

	require.Equal(t, "SUCCEEDED", o.Status)
	require.Equal(t, []string{"outline by worker-a (epoch 1)", "draft by worker-a (epoch 1)",
		"draft by worker-b (epoch 2)", "review by worker-b (epoch 2)"}, o.Ran,
		"B started at draft: outline ran once, on A")
	require.Equal(t, []string{"outline by worker-a (epoch 1)", "draft by worker-b (epoch 2)",
		"review by worker-b (epoch 2)"}, o.Result.Trail, "the result carries A's outline, restored from A's checkpoint")

	require.True(t, fence.IsFenced(o.LateSet), "A's late Set: %v", o.LateSet)
	require.ErrorIs(t, o.LateSet, fence.ErrStaleEpoch)

	// Two checkpoints, A's (before draft) and B's (before review); the
	// refused one stored nothing and the newest is still B's, unchanged.
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	list, _, err := c.Checkpoints(context.Background(), o.Run, o.NS, 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, []int64{2, 1}, []int64{list[0].Version, list[1].Version})
	require.Equal(t, []string{"worker-b", "worker-a"}, []string{list[0].Worker, list[1].Worker})
	require.Equal(t, []int64{2, 1}, []int64{list[0].Epoch, list[1].Epoch})
	require.Contains(t, string(list[1].Data), "outline by worker-a (epoch 1)", "A's checkpoint holds draft's input")
	require.JSONEq(t, `{"eino_checkpoint_id": "`+o.Run+`.write", "encoding": "json"}`, string(list[1].Metadata))
	require.Equal(t, o.Before.Version, o.After.Version)
	require.Equal(t, string(o.Before.Data), string(o.After.Data))
	require.Equal(t, "worker-b", o.After.Worker)

	var refused []fence.Event
	evs, err := c.Events(context.Background(), o.Run, "", 0)
	require.NoError(t, err)
	for _, e := range evs {
		if e.Type == "stale_rejected" {
			refused = append(refused, e)
		}
	}
	require.Len(t, refused, 1)
	require.Equal(t, "checkpoint", refused[0].Details["op"])
	require.Equal(t, "worker-a", refused[0].Worker)
	require.Equal(t, int64(1), refused[0].Epoch)
	require.Equal(t, "2", refused[0].Details["current_epoch"])
	require.Equal(t, o.NS, refused[0].Details["ns"])
}

// An Eino graph whose node asks a person (compose.Interrupt) parks its
// baton node: WAITING with the interrupt as its request, no lease, no
// attempt counted, its run RUNNING. Every worker restarts while it waits.
// Client.Resume's value reaches the node through compose.GetResumeContext,
// the graph goes on from its checkpoint (draft ran once, on A), and the
// run succeeds; a second resume of the wait returns the first answer.
func TestGraphAsksAPersonAndResumesWithTheAnswer(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	o, err := approvalDemo(context.Background(), rdb, log, t.Output())
	require.NoError(t, err)
	require.NoError(t, o.check())

	require.Equal(t, "WAITING", o.Parked.State)
	require.Nil(t, o.Parked.LeaseUntil, "a parked node holds no lease")
	require.Equal(t, o.Parked.Attempt, o.Parked.Releases, "the wait counts no attempt")
	require.Equal(t, "RUNNING", o.RunWhileParked)
	require.Equal(t, o.Run+".publish", o.Request.CheckPointID)
	require.Len(t, o.Request.Interrupts, 1)
	require.Equal(t, "runnable:approval;node:approve", o.Request.Interrupts[0].Address)
	require.JSONEq(t, `{"question": "publish the essay on fencing tokens?",
		"trail": ["draft by worker-a (epoch 1)"]}`, string(o.Request.Interrupts[0].Info))

	require.False(t, o.Resumed.Replay)
	require.True(t, o.Again.Replay, "the second resume is a replay")
	require.JSONEq(t, string(o.Answer), string(o.Again.Answer.Value), "the first answer stands")

	require.Equal(t, "SUCCEEDED", o.Status)
	require.Equal(t, &Decision{Approved: true, Note: "ship it"}, o.Result.Decision)
	require.Len(t, o.Ran, 4)
	require.Equal(t, []string{"draft by worker-a (epoch 1)", "approve by worker-a (epoch 1)"}, o.Ran[:2])
	require.Regexp(t, `^approve by worker-b \(epoch \d+\)$`, o.Ran[2])
	require.Regexp(t, `^publish by worker-b \(epoch \d+\)$`, o.Ran[3])
	require.Equal(t, "draft by worker-a (epoch 1)", o.Result.Trail[0], "draft's output came from A's checkpoint")
	require.Regexp(t, `^approve by worker-b \(epoch \d+\): approved=true "ship it"$`, o.Result.Trail[1])
	require.Regexp(t, `^publish by worker-b`, o.Result.Trail[2])

	// The request the kind saved as it parked is the wait's; the graph's
	// namespace holds A's checkpoint (at approve) and B's (before publish).
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	saved, err := c.LatestCheckpoint(context.Background(), o.Run, o.WaitNS)
	require.NoError(t, err)
	var req Request
	require.NoError(t, json.Unmarshal(saved.Data, &req))
	require.Equal(t, o.Request, req)
	require.Equal(t, "worker-a", saved.Worker)
	list, _, err := c.Checkpoints(context.Background(), o.Run, o.NS, 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, []string{"worker-b", "worker-a"}, []string{list[0].Worker, list[1].Worker})
	require.Equal(t, list[1].Version, o.Request.Version, "the request names the checkpoint of the interrupt")

	evs, err := c.Events(context.Background(), o.Run, "", 0)
	require.NoError(t, err)
	count := map[string]int{}
	for _, e := range evs {
		count[e.Type]++
	}
	require.Equal(t, 1, count["parked"], "%v", count)
	require.Equal(t, 1, count["resumed"], "%v", count)
	require.Zero(t, count["stale_rejected"], "%v", count)
}

// approvalBundle is a client and a submitted approval run for the tests
// that drive one by hand.
type approvalBundle struct {
	t   *testing.T
	ctx context.Context
	rdb redis.UniversalClient
	c   *runner.Client
	log *slog.Logger
	run string
}

func setupApproval(t *testing.T) *approvalBundle {
	t.Helper()
	rdb := startRedis(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &approvalBundle{t: t, ctx: ctx, rdb: rdb, c: c, run: "approval",
		log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

func (b *approvalBundle) worker(id string, hook stepHook) *runner.Worker {
	b.t.Helper()
	w, err := startWorker(b.ctx, b.rdb, b.log, id, hook, nil)
	require.NoError(b.t, err)
	b.t.Cleanup(w.Shutdown)
	return w
}

func (b *approvalBundle) submit() {
	b.t.Helper()
	_, err := b.c.Submit(b.ctx, &runner.RunSpec{ID: b.run, Nodes: []runner.NodeSpec{{ID: "publish", Kind: "approval",
		Queue: queue, Input: json.RawMessage(`{"topic": "fencing tokens"}`)}}})
	require.NoError(b.t, err)
}

// parked waits for the node to park on a wait other than after's, and
// returns it with its request.
func (b *approvalBundle) parked(after string) (*fence.NodeInfo, Request) {
	b.t.Helper()
	for {
		n, err := waitNode(b.ctx, b.c, b.run, "publish", "WAITING")
		require.NoError(b.t, err)
		if n.Wait != nil && n.Wait.ID != after {
			var req Request
			require.NoError(b.t, json.Unmarshal(n.Wait.Request, &req))
			return n, req
		}
		time.Sleep(20 * time.Millisecond) // polling, as waitNode does
	}
}

func (b *approvalBundle) result() (*fence.RunInfo, Essay) {
	b.t.Helper()
	info, err := b.c.Wait(b.ctx, b.run)
	require.NoError(b.t, err)
	var e Essay
	if len(info.Nodes[0].Result) > 0 {
		require.NoError(b.t, json.Unmarshal(info.Nodes[0].Result, &e))
	}
	return info, e
}

// An answer the node cannot take is asked again: the node parks on a new
// wait whose request says why; the next answer finishes the run. A
// rejection shelves the essay.
func TestAWrongAnswerIsAskedAgain(t *testing.T) {
	t.Parallel()
	b := setupApproval(t)
	b.worker("worker-a", nil)
	b.submit()
	first, _ := b.parked("")
	_, err := b.c.Resume(b.ctx, b.run, "publish", "", json.RawMessage(`"maybe"`))
	require.NoError(t, err)

	second, req := b.parked(first.Wait.ID)
	require.Len(t, req.Interrupts, 1)
	var ask Ask
	require.NoError(t, json.Unmarshal(req.Interrupts[0].Info, &ask))
	require.Equal(t, `want {"approved": true|false, "note": "..."}, got "maybe"`, ask.Error)
	require.Equal(t, []string{"draft by worker-a (epoch 1)"}, ask.Trail, "the input came back from the interrupt state")
	require.Equal(t, second.Attempt, second.Releases, "neither wait counted an attempt")

	_, err = b.c.Resume(b.ctx, b.run, "publish", second.Wait.ID, json.RawMessage(`{"approved": false, "note": "not yet"}`))
	require.NoError(t, err)
	info, e := b.result()
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)
	require.Equal(t, &Decision{Approved: false, Note: "not yet"}, e.Decision)
	require.Len(t, e.Trail, 3)
	require.Regexp(t, `^shelve by worker-a`, e.Trail[2])
}

// A worker that took the answer and then lost the node (stalled inside
// approve, before the graph saved again) did not use it up: the next
// owner resumes the same interrupt with the same answer.
func TestTheAnswerSurvivesATakeover(t *testing.T) {
	t.Parallel()
	b := setupApproval(t)
	a := b.worker("worker-a", nil)
	b.submit()
	b.parked("")
	a.Shutdown()

	stalled, wake := make(chan struct{}), make(chan struct{})
	wakeB := sync.OnceFunc(func() { close(wake) })
	t.Cleanup(wakeB)
	w := b.worker("worker-b", func(ctx context.Context, step string) {
		if step == "approve" {
			close(stalled)
			<-wake
		}
	})
	_, err := b.c.Resume(b.ctx, b.run, "publish", "", json.RawMessage(`{"approved": true, "note": "go"}`))
	require.NoError(t, err)
	select {
	case <-stalled:
	case <-b.ctx.Done():
		t.Fatal("worker-b never reached approve")
	}
	w.Kill() // heartbeats stop; the lease runs out

	b.worker("worker-c", nil)
	info, e := b.result()
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)
	require.Equal(t, &Decision{Approved: true, Note: "go"}, e.Decision)
	require.Regexp(t, `^approve by worker-c \(epoch 3\): approved=true "go"$`, e.Trail[1])
	require.Regexp(t, `^publish by worker-c`, e.Trail[2])
	wakeB()
}

// With several interrupts, an object keyed by interrupt ids answers each
// its own; any other value answers them all.
func TestResumeDataForSeveralInterrupts(t *testing.T) {
	t.Parallel()
	one := []Interrupt{{ID: "a"}}
	two := []Interrupt{{ID: "a"}, {ID: "b"}}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	require.Equal(t, map[string]any{"a": raw(`{"b": 1}`)}, resumeData(one, raw(`{"b": 1}`)))
	require.Equal(t, map[string]any{"a": raw(`true`)}, resumeData(two, raw(`{"a": true}`)), "b is not resumed")
	require.Equal(t, map[string]any{"a": raw(`1`), "b": raw(`2`)}, resumeData(two, raw(`{"a": 1, "b": 2}`)))
	require.Equal(t, map[string]any{"a": raw(`{"a": 1, "c": 2}`), "b": raw(`{"a": 1, "c": 2}`)},
		resumeData(two, raw(`{"a": 1, "c": 2}`)), "c is no interrupt: the value is for all")
	require.Equal(t, map[string]any{"a": raw(`"yes"`), "b": raw(`"yes"`)}, resumeData(two, raw(`"yes"`)))
}

// Get returns what Set saved, for bytes that are JSON (kept as they are)
// and bytes that are not (kept base64-encoded), and nothing for an id
// never saved; ids that are not baton ids work too.
func TestStoreRoundTripsAnyBytes(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t)
	c, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	var store CheckPointStore

	w, err := runner.NewWorker(runner.WorkerConfig{Redis: rdb, ID: "w", Queues: map[string]int{queue: 1},
		PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	require.NoError(t, err)
	w.Register("check", runner.KindFunc(func(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
		ctx = WithTask(ctx, t)
		for _, data := range [][]byte{{0xff, 0x00, 0x01}, []byte(`{"step": 2}`)} {
			if err := store.Set(ctx, "user 7/thread", data); err != nil {
				return nil, err
			}
			b, ok, err := store.Get(ctx, "user 7/thread")
			if err != nil || !ok || !bytes.Equal(b, data) {
				return nil, fmt.Errorf("get after set of %q: %q, found %v, err %v", data, b, ok, err)
			}
		}
		if _, ok, err := store.Get(ctx, "never-saved"); err != nil || ok {
			return nil, fmt.Errorf("get of an id never saved: found %v, err %v", ok, err)
		}
		return json.RawMessage(`"ok"`), nil
	}))
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Shutdown)

	_, err = c.Submit(context.Background(), &runner.RunSpec{ID: "bytes", Nodes: []runner.NodeSpec{
		{ID: "n", Kind: "check", Queue: queue, MaxAttempts: 1}}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := c.Wait(ctx, "bytes")
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)

	ns, err := Namespace("user 7/thread")
	require.NoError(t, err)
	list, _, err := c.Checkpoints(context.Background(), "bytes", ns, 0, 10)
	require.NoError(t, err)
	require.Len(t, list, 2, "each Set is a version, though the Eino id is the same")
	require.JSONEq(t, `{"step": 2}`, string(list[0].Data), "JSON is stored as it is, readable")
}

// Outside a baton task there is no lease to write under and no thread to
// read: both calls say so.
func TestStoreNeedsATask(t *testing.T) {
	t.Parallel()
	var store CheckPointStore
	require.ErrorIs(t, store.Set(context.Background(), "x", []byte(`{}`)), ErrNoTask)
	_, _, err := store.Get(context.Background(), "x")
	require.ErrorIs(t, err, ErrNoTask)
}

// Every Eino id maps to one namespace and back; baton ids stay readable.
func TestNamespaceIsReversible(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"order-42":               "eino:order-42",
		"run.node":               "eino:run.node",
		"b64":                    "eino:b64",
		"b64:x":                  "eino:b64:YjY0Ong",
		"user 7/thread":          "eino:b64:dXNlciA3L3RocmVhZA",
		"..":                     "eino:b64:Li4",
		"café":                   "eino:b64:Y2Fmw6k",
		strings.Repeat("a", 129): "eino:b64:" + strings.Repeat("YWFh", 43),
	} {
		ns, err := Namespace(id)
		require.NoError(t, err, id)
		require.Equal(t, want, ns, id)
		require.NoError(t, fence.ValidateNS(ns))
		back, ok := CheckPointID(ns)
		require.True(t, ok, ns)
		require.Equal(t, id, back)
	}
	for _, bad := range []string{"", strings.Repeat("/", 186)} {
		_, err := Namespace(bad)
		require.ErrorIs(t, err, fence.ErrInvalidID, "%q", bad)
	}
	for _, ns := range []string{"agent", "eino:", "eino:b64:", "eino:a:b", "eino:b64:b3JkZXItNDI" /* "order-42", kept plain */} {
		_, ok := CheckPointID(ns)
		require.False(t, ok, ns)
	}
}

// startRedis runs a redis-server on a free port for the test and returns a
// client. Without redis-server the test is skipped, or fails when
// BATON_REQUIRE_REDIS is set (as in the core module's suite).
func startRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("BATON_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server not found: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { _ = rdb.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			logText, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on port %d did not answer:\n%s", port, logText)
		}
		time.Sleep(5 * time.Millisecond) // polling a process start-up
	}
	return rdb
}
