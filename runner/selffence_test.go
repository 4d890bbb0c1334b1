package runner_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner"
)

// partition is a go-redis hook that cuts one client off from Redis.
type partition struct{ cut atomic.Bool }

var errPartitioned = errors.New("partitioned")

func (p *partition) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p.cut.Load() {
			return nil, errPartitioned
		}
		return next(ctx, network, addr)
	}
}

func (p *partition) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p.cut.Load() {
			cmd.SetErr(errPartitioned)
			return errPartitioned
		}
		return next(ctx, cmd)
	}
}

func (p *partition) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if p.cut.Load() {
			for _, c := range cmds {
				c.SetErr(errPartitioned)
			}
			return errPartitioned
		}
		return next(ctx, cmds)
	}
}

// A worker that cannot renew its lease stops trusting it before the lease
// ends on Redis's clock, and cancels its handler with ErrLeaseLost.
func TestWorkerCutOffFromRedisFencesItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := &partition{}
	isolated := redis.NewClient(&redis.Options{Addr: b.srv.Addr(), MaxRetries: -1})
	isolated.AddHook(p)
	t.Cleanup(func() { _ = isolated.Close() })

	type gaveUp struct {
		at  time.Time
		why error
	}
	stopped := make(chan gaveUp, 1)
	rec := newRecorder()
	rec.block = func(ctx context.Context, _ *runner.Task) error {
		p.cut.Store(true) // the network goes away mid-node
		<-ctx.Done()
		// When the handler is told, not when the test gets to look: on a
		// loaded machine the test's own reads can take longer than the
		// margin the worker keeps.
		stopped <- gaveUp{time.Now(), context.Cause(ctx)}
		return context.Cause(ctx)
	}
	cfg := b.fastConfig("w1")
	cfg.Redis = isolated
	cfg.LeaseTTL, cfg.HeartbeatInterval = 3*time.Second, time.Second
	b.worker(cfg, map[string]runner.Kind{"work": rec})
	id := b.submit(`{"id":"cut","nodes":[{"id":"a","kind":"work"}]}`)

	g := recv(t, stopped, 10*time.Second)
	require.ErrorIs(t, g.why, runner.ErrLeaseLost)
	info, err := b.client.Status(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "RUNNING", info.Nodes[0].State)
	require.NotNil(t, info.Nodes[0].LeaseUntil)
	// The lease's end is on Redis's clock, which is this machine's clock.
	require.True(t, g.at.Before(*info.Nodes[0].LeaseUntil),
		"the worker gave up at %s, after its lease had already ended on Redis (%s)", g.at, info.Nodes[0].LeaseUntil)
	p.cut.Store(false)
}
