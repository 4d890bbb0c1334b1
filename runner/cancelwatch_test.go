package runner_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
)

// slowBeats is a worker whose heartbeats cannot be what carries a cancel or
// progress within a test: the default 30s lease, renewed every 10s.
func (b *testBundle) slowBeats(id string) runner.WorkerConfig {
	cfg := b.fastConfig(id)
	cfg.LeaseTTL, cfg.HeartbeatInterval = 30*time.Second, 10*time.Second
	return cfg
}

// blocker is a kind that reports when it starts and, once its context ends,
// with what cause and when.
type blocker struct {
	started chan time.Time
	stopped chan stopped
}

type stopped struct {
	cause error
	at    time.Time
}

func newBlocker() *blocker {
	return &blocker{started: make(chan time.Time, 1), stopped: make(chan stopped, 1)}
}

func (k *blocker) kind() runner.Kind {
	return runner.KindFunc(func(ctx context.Context, _ *runner.Task) (json.RawMessage, error) {
		k.started <- time.Now()
		<-ctx.Done()
		k.stopped <- stopped{cause: context.Cause(ctx), at: time.Now()}
		return nil, context.Cause(ctx)
	})
}

// heartbeatAt is when the node was last renewed ("" if it never was).
func (b *testBundle) heartbeatAt(run, node string) string {
	b.t.Helper()
	v, err := b.rdb.HGet(context.Background(), fence.Keys{}.Node(run, run, node), "heartbeat_at").Result()
	if err != nil {
		return ""
	}
	return v
}

func (b *testBundle) cancel(run string) time.Time {
	b.t.Helper()
	at := time.Now()
	res, err := b.client.Cancel(context.Background(), run, "test")
	require.NoError(b.t, err)
	require.Positive(b.t, res.Running)
	return at
}

// A cancel reaches a handler blocked in a long node at once, pushed by the
// cancel script, long before the first heartbeat (10s) could carry it; the
// node and its run end CANCELLED through the fenced fail path.
func TestCancelIsPushedToTheRunningHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := newBlocker()
	cfg := b.slowBeats("w1")
	workerStarted := time.Now()
	b.worker(cfg, map[string]runner.Kind{"block": k.kind(), "work": newRecorder()})
	id := b.submit(`{"id":"push","nodes":[{"id":"a","kind":"block"},{"id":"b","kind":"work","deps":["a"]}]}`)
	recv(t, k.started, 10*time.Second)

	cancelled := b.cancel(id)
	s := recv(t, k.stopped, 10*time.Second)
	require.ErrorIs(t, s.cause, runner.ErrRunCancelled)
	require.Less(t, s.at.Sub(cancelled), 3*time.Second, "the cancel was pushed, not left to a heartbeat")
	require.Less(t, s.at.Sub(workerStarted), cfg.HeartbeatInterval, "no heartbeat tick could have fired yet")
	require.Empty(t, b.heartbeatAt(id, "a"), "no renewal carried the cancel")

	info := b.waitRun(id, 3*time.Second)
	require.Equal(t, "CANCELLED", info.Status)
	require.Equal(t, "CANCELLED", info.Nodes[0].State)
	require.Contains(t, info.Nodes[0].Error, runner.ErrRunCancelled.Error())
	require.Equal(t, "CANCELLED", info.Nodes[1].State)
	evs := b.events(id)
	require.Equal(t, 1, countEvents(evs, "cancelled")["a"])
	require.Zero(t, countEvents(evs, "stale_rejected")["a"])
}

// A cancelled exec node's process group gets SIGTERM at once, and the node
// ends CANCELLED. Its progress line shows in Status while it runs, before
// any heartbeat.
func TestCancelSignalsAnExecNode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.worker(b.slowBeats("w1"), map[string]runner.Kind{"exec": kinds.Exec(kinds.ExecOptions{KillGrace: 20 * time.Second})})
	out := filepath.Join(t.TempDir(), "signal")
	script := `trap 'echo TERM > "$OUT"; exit 143' TERM; echo '::progress 5'; sleep 60 & wait`
	id := b.submit(`{"id":"ex","nodes":[{"id":"sh","kind":"exec","input":{"command":["sh","-c",` +
		quote(script) + `],"env":{"OUT":` + quote(out) + `}}}]}`)
	waitFor(t, 5*time.Second, "the command's progress (its trap is set)", func() bool {
		info, err := b.client.Status(context.Background(), id)
		return err == nil && info.Nodes[0].State == "RUNNING" && info.Nodes[0].Progress == 5
	})

	cancelled := b.cancel(id)
	info := b.waitRun(id, 10*time.Second)
	require.Less(t, time.Since(cancelled), 3*time.Second, "well before the 20s SIGKILL grace or a heartbeat")
	require.Equal(t, "CANCELLED", info.Status)
	require.Equal(t, "CANCELLED", info.Nodes[0].State)
	require.Contains(t, info.Nodes[0].Error, "stopped with SIGTERM")
	require.Contains(t, info.Nodes[0].Error, runner.ErrRunCancelled.Error())
	got, err := os.ReadFile(out)
	require.NoError(t, err, "the command never saw SIGTERM")
	require.Equal(t, "TERM", strings.TrimSpace(string(got)))
}

// Progress a handler reports shows in Status within about a second under the
// default lease (heartbeats every 10s), and a burst of reports is coalesced
// into a few writes.
func TestProgressIsStoredWhileTheNodeRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	step, done := make(chan struct{}), make(chan struct{})
	k := runner.KindFunc(func(ctx context.Context, task *runner.Task) (json.RawMessage, error) {
		task.SetProgress(40)
		<-step
		for p := 41; p <= 99; p++ {
			task.SetProgress(p)
		}
		<-done
		return json.RawMessage(`{}`), nil
	})
	cfg := b.fastConfig("w1")
	cfg.LeaseTTL, cfg.HeartbeatInterval = 0, 0 // the defaults: 30s, renewed every 10s
	b.worker(cfg, map[string]runner.Kind{"work": k})
	id := b.submit(`{"id":"prog","nodes":[{"id":"a","kind":"work"}]}`)
	progress := func(want int) func() bool {
		return func() bool {
			info, err := b.client.Status(context.Background(), id)
			return err == nil && info.Nodes[0].State == "RUNNING" && info.Nodes[0].Progress == want
		}
	}
	waitFor(t, 2*time.Second, "progress 40 in Status", progress(40))
	close(step)
	waitFor(t, 2*time.Second, "progress 99 in Status", progress(99))
	close(done)
	require.Equal(t, "SUCCEEDED", b.waitRun(id, 10*time.Second).Status)
	writes := countEvents(b.events(id), "progress")["a"]
	require.GreaterOrEqual(t, writes, 2)
	require.LessOrEqual(t, writes, 4, "60 reports in a burst are coalesced, not written one by one")
}

// With the push lost (the worker's subscriber is not running), the
// heartbeat's cancel flag still stops the node.
func TestLostCancelPushFallsBackToTheHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := newBlocker()
	w := b.worker(b.fastConfig("w1"), map[string]runner.Kind{"block": k.kind()})
	runner.StopCancelPush(w)
	n, err := b.rdb.PubSubNumSub(context.Background(), fence.Keys{}.CancelChannel()).Result()
	require.NoError(t, err)
	require.Zero(t, n[fence.Keys{}.CancelChannel()], "nobody hears the push")

	id := b.submit(`{"id":"lost","nodes":[{"id":"a","kind":"block"}]}`)
	recv(t, k.started, 10*time.Second)
	b.cancel(id)
	require.ErrorIs(t, recv(t, k.stopped, 10*time.Second).cause, runner.ErrRunCancelled)
	info := b.waitRun(id, 10*time.Second)
	require.Equal(t, "CANCELLED", info.Status)
	require.NotEmpty(t, b.heartbeatAt(id, "a"), "a renewal carried the cancel")
}

// The subscriber survives a Redis restart: it subscribes again by itself,
// and cancels are pushed at once afterwards.
func TestCancelPushSurvivesARedisRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k := newBlocker()
	b.worker(b.slowBeats("w1"), map[string]runner.Kind{"block": k.kind()})
	channel := fence.Keys{}.CancelChannel()
	b.srv.Restart() // no persistence: an empty Redis
	waitFor(t, 20*time.Second, "the worker to subscribe again", func() bool {
		n, err := b.rdb.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && n[channel] == 1
	})

	id := b.submit(`{"id":"again","nodes":[{"id":"a","kind":"block"}]}`)
	recv(t, k.started, 20*time.Second)
	cancelled := b.cancel(id)
	s := recv(t, k.stopped, 10*time.Second)
	require.ErrorIs(t, s.cause, runner.ErrRunCancelled)
	require.Less(t, s.at.Sub(cancelled), 3*time.Second, "pushed, not left to a heartbeat")
	require.Equal(t, "CANCELLED", b.waitRun(id, 3*time.Second).Status)
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s) // cannot fail: a string
	return string(b)
}
