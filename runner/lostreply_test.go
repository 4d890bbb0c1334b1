package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

var errReplyLost = errors.New("test: reply lost after the command ran")

// lossyLink is a go-redis hook that loses the reply of every n-th call of
// each of baton's scripts after Redis ran it, as a proxy that drops
// responses would. Asynq's own commands pass untouched.
type lossyLink struct {
	every int
	names map[string]string // script SHA1 -> name

	mu    sync.Mutex
	calls map[string]int
	lost  map[string]int
}

func newLossyLink(t *testing.T, every int) *lossyLink {
	t.Helper()
	l := &lossyLink{every: every, names: redistest.ScriptNames(t), calls: map[string]int{}, lost: map[string]int{}}
	return l
}

func (l *lossyLink) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *lossyLink) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (l *lossyLink) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err != nil || len(args) < 2 || cmd.Name() != "evalsha" {
			return err
		}
		sha, _ := args[1].(string)
		name, ok := l.names[sha]
		if !ok {
			return nil
		}
		l.mu.Lock()
		l.calls[name]++
		lose := l.calls[name]%l.every == 0
		if lose {
			l.lost[name]++
		}
		l.mu.Unlock()
		if lose {
			cmd.SetErr(errReplyLost)
			return errReplyLost
		}
		return nil
	}
}

func (l *lossyLink) lostOf(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost[name]
}

// Replies lost after their script ran cost neither an attempt nor a node:
// with max_attempts 1 everywhere, every run of chains and fan-ins
// succeeds, every node runs once, is claimed once and committed once.
func TestLostRepliesCostNoAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	link := newLossyLink(t, 3)
	lossy := redis.NewClient(&redis.Options{Addr: b.srv.Addr(), MaxRetries: -1})
	lossy.AddHook(link)
	t.Cleanup(func() { _ = lossy.Close() })

	rec := newRecorder()
	cfg := b.fastConfig("lossy")
	cfg.Redis = lossy
	b.worker(cfg, map[string]runner.Kind{"work": rec})

	var ids []string
	for i := range 8 {
		ids = append(ids, b.submit(fmt.Sprintf(`{"id":"lossy-%d","nodes":[
			{"id":"a","kind":"work","max_attempts":1},
			{"id":"b","kind":"work","deps":["a"],"max_attempts":1},
			{"id":"c","kind":"work","deps":["a"],"max_attempts":1},
			{"id":"d","kind":"work","deps":["b","c"],"max_attempts":1},
			{"id":"e","kind":"work","deps":["d"],"max_attempts":1}]}`, i)))
	}
	for _, id := range ids {
		info := b.waitRun(id, 30*time.Second)
		require.Equal(t, "SUCCEEDED", info.Status, "run %s: %+v", id, info.Nodes)
		evs := b.events(id)
		for _, n := range info.Nodes {
			require.Equal(t, int64(1), n.Attempt, "%s/%s: a lost reply burnt no attempt", id, n.ID)
			require.Equal(t, int64(1), n.Epoch, "%s/%s: claimed once", id, n.ID)
		}
		require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}, countEvents(evs, "committed"), id)
		require.Empty(t, countEvents(evs, "takeover"), "%s: no claim was orphaned", id)
	}
	for _, node := range []string{"a", "b", "c", "d", "e"} {
		require.Equal(t, len(ids), rec.count(node), "node %s ran once per run", node)
	}
	for _, script := range []string{"claim", "commit"} {
		require.Positive(t, link.lostOf(script), "the link lost %s replies", script)
	}
}

// A handler that returns a result after its worker fenced itself (no
// renewal for too long) gets nothing committed, even though nobody took
// the node over yet: the result of epoch 1 is never stored, the node is
// taken over and committed at epoch 2.
func TestSelfFencedAttemptDoesNotCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := &partition{}
	isolated := redis.NewClient(&redis.Options{Addr: b.srv.Addr(), MaxRetries: -1})
	isolated.AddHook(p)
	t.Cleanup(func() { _ = isolated.Close() })

	fenced := make(chan error, 1)
	var once sync.Once
	rec := newRecorder()
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		p.cut.Store(true) // the network goes away mid-node
		<-ctx.Done()
		fenced <- context.Cause(ctx)
		p.cut.Store(false) // and comes back at once
		return nil         // the handler finishes anyway, with a result
	}
	cfg := b.fastConfig("w1")
	cfg.Redis = isolated
	b.worker(cfg, map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"selffenced","nodes":[{"id":"a","kind":"work","max_attempts":3}]}`)

	require.ErrorIs(t, recv(t, fenced, 10*time.Second), runner.ErrLeaseLost)
	info := b.waitRun(id, 30*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Equal(t, int64(2), info.Nodes[0].Epoch, "taken over after the lease ran out")
	require.Contains(t, string(info.Nodes[0].Result), `"epoch":2`, "the self-fenced attempt's result was not stored")
	require.Equal(t, map[string]int{"a": 1}, countEvents(b.events(id), "committed"))
}

// A renewal in flight while its own attempt commits is neither a lost lease
// nor a stale write: draining many short nodes with frequent heartbeats
// raises no baton_stale_writes_rejected_total{op="heartbeat"}.
func TestHeartbeatRacingItsOwnCommitIsNotStale(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := runner.NewMetrics(nil)
	cfg := b.fastConfig("busy")
	cfg.Concurrency = 16
	// Renewals every 100 ms while 16 nodes of 20 ms each commit: many
	// renewals are in flight as their own attempt commits. The lease is
	// long enough that a loaded machine does not lose it for real.
	cfg.LeaseTTL, cfg.HeartbeatInterval = 2*time.Second, 100*time.Millisecond
	cfg.Metrics = m
	rec := newRecorder()
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		time.Sleep(20 * time.Millisecond) // the node's work
		return nil
	}
	b.worker(cfg, map[string]runner.Kind{"work": rec})
	var nodes []string
	for i := range 400 {
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%d","kind":"work"}`, i))
	}
	id := b.submit(`{"id":"drain","nodes":[` + strings.Join(nodes, ",") + `]}`)
	info := b.waitRun(id, 60*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status)
	require.Zero(t, counterValue(t, m.StaleRejected.WithLabelValues("heartbeat")))
	require.Empty(t, countEvents(b.events(id), "stale_rejected"))
	require.Empty(t, countEvents(b.events(id), "takeover"))
}

// deafLink runs every command and pipeline in Redis but, while deaf is set,
// loses every reply: the worker's renewals take effect, and it never hears.
type deafLink struct{ deaf atomic.Bool }

func (d *deafLink) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d *deafLink) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if d.deaf.Load() {
			cmd.SetErr(errReplyLost)
			return errReplyLost
		}
		return err
	}
}

func (d *deafLink) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if d.deaf.Load() {
			for _, c := range cmds {
				c.SetErr(errReplyLost)
			}
			return errReplyLost
		}
		return err
	}
}

// A worker that hears no renewal for too long stops trusting its lease and
// abandons the attempt, even though its renewals reached Redis. It then
// gives the node back with a fenced release: lost replies cost no attempt,
// and a max_attempts-1 node still succeeds.
func TestLostRenewalRepliesCostNoAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	link := &deafLink{}
	deaf := redis.NewClient(&redis.Options{Addr: b.srv.Addr(), MaxRetries: -1})
	deaf.AddHook(link)
	t.Cleanup(func() { _ = deaf.Close() })

	var once sync.Once
	fenced := make(chan error, 1)
	rec := newRecorder()
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		link.deaf.Store(true)
		<-ctx.Done()
		fenced <- context.Cause(ctx)
		link.deaf.Store(false)
		return context.Cause(ctx)
	}
	cfg := b.fastConfig("deaf")
	cfg.Redis = deaf
	b.worker(cfg, map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"deaf","nodes":[{"id":"a","kind":"work","max_attempts":1}]}`)

	require.ErrorIs(t, recv(t, fenced, 10*time.Second), runner.ErrLeaseLost)
	info := b.waitRun(id, 30*time.Second)
	require.Equal(t, "SUCCEEDED", info.Status, "%+v", info.Nodes)
	evs := b.events(id)
	require.Equal(t, map[string]int{"a": 1}, countEvents(evs, "released"), "the abandoned attempt gave the node back")
	require.Empty(t, countEvents(evs, "takeover"), "nobody had to wait for the lease to run out")
	require.Equal(t, 2, rec.count("a"))
}
