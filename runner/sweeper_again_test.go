package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

var errSweepReplyLost = errors.New("test: sweep reply lost")

// loseOnePipeline lets the next pipeline of scripts run in Redis and loses
// its replies, as a link that drops responses does.
type loseOnePipeline struct{ armed atomic.Bool }

func (l *loseOnePipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (l *loseOnePipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (l *loseOnePipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if len(cmds) > 0 && cmds[0].Name() == "evalsha" && l.armed.CompareAndSwap(true, false) {
			for _, c := range cmds {
				c.SetErr(errSweepReplyLost)
			}
			return errSweepReplyLost
		}
		return err
	}
}

// A sweeper whose sweep ran in Redis but whose reply was lost enqueues the
// expired lease it was handed at its next tick. It used to leave it to the
// retry interval (an hour here; 2 x SWEEP_INTERVAL in a runner), so the
// takeover came that long after LEASE_TTL + GRACE + SWEEP_INTERVAL.
func TestSweeperEnqueuesALostHandOutAtItsNextTick(t *testing.T) {
	t.Parallel()
	r := redistest.Start(t)
	rdb := r.Client(t)
	ctx := t.Context()
	store := fence.New(rdb, nil)
	require.NoError(t, store.Load(ctx))
	lose := &loseOnePipeline{}
	lossyRdb := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	lossyRdb.AddHook(lose)
	t.Cleanup(func() { _ = lossyRdb.Close() })
	lossy := fence.New(lossyRdb, nil)

	node := []fence.NodeSpec{{ID: "a", Kind: "k", Queue: "default", Input: "null",
		Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 3}}
	_, err := store.Submit(ctx, fence.SubmitArgs{Run: "dead", Digest: "d", Nodes: node})
	require.NoError(t, err)
	ref := fence.NodeRef{Thread: "dead", Run: "dead", Node: "a"}
	claimed, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	const ttl, grace = 100 * time.Millisecond, 50 * time.Millisecond
	_, err = store.Claim(ctx, ref, "gone", ttl, 0)
	require.NoError(t, err)
	expired := claimed.Add(ttl + grace + 50*time.Millisecond)
	for n, err := rdb.Time(ctx).Result(); n.Before(expired); n, err = rdb.Time(ctx).Result() {
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond) // Redis's clock: the lease runs out on its own
	}

	q := newEnqueuer(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	m := NewMetrics(nil)
	s := &sweeper{store: lossy, queue: q, interval: time.Hour, log: slog.New(slog.NewTextHandler(io.Discard, nil)), m: m,
		opts: fence.SweepOptions{Grace: grace, Threshold: time.Hour, Limit: 10, Retry: time.Hour},
		self: fence.WorkerInfo{ID: "r1"}}
	require.NoError(t, lossyRdb.Ping(ctx).Err()) // the connection's own setup is not the sweep
	lose.armed.Store(true)
	s.sweepNodes(ctx)
	require.False(t, lose.armed.Load(), "the sweep ran and its reply was lost")
	pending := func() []string {
		tasks, err := insp.ListPendingTasks("default")
		if errors.Is(err, asynq.ErrQueueNotFound) {
			return nil
		}
		require.NoError(t, err)
		var ids []string
		for _, x := range tasks {
			ids = append(ids, x.ID)
		}
		return ids
	}
	require.Empty(t, pending(), "nothing enqueued: the hand-out never arrived")

	s.sweepNodes(ctx)
	require.Equal(t, []string{TaskID(ref, 2)}, pending(), "the next tick enqueues the lost hand-out")
}
