package runner

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/internal/delivery"
)

// pauseEvery is how often a worker reads which of its queues are paused.
// Asynq itself stops delivering from a paused queue at once; a chain that
// a commit continues in-process does not go through Asynq, so the worker
// stops continuing on a paused queue within this period of the pause.
const pauseEvery = 250 * time.Millisecond

// pauseWatch keeps the worker's queues that are not paused: the queues a
// commit may claim the next node of a chain on (fence.Continue.Queues).
type pauseWatch struct {
	rdb    redis.UniversalClient
	queues []string // served, sorted
	log    *slog.Logger
	open   atomic.Pointer[[]string]
	wg     sync.WaitGroup
}

func newPauseWatch(rdb redis.UniversalClient, queues []string, log *slog.Logger) *pauseWatch {
	p := &pauseWatch{rdb: rdb, queues: queues, log: log}
	p.open.Store(&queues)
	return p
}

// start reads the paused queues once, so that a queue paused before the
// worker started is honoured from its first commit, then every pauseEvery
// until ctx ends.
func (p *pauseWatch) start(ctx context.Context) {
	p.refresh(ctx)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(pauseEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.refresh(ctx)
			}
		}
	}()
}

func (p *pauseWatch) wait() { p.wg.Wait() }

// refresh reads the paused keys of the served queues in one round trip.
// A failed read keeps what was read before: a Redis that does not answer
// fails the commit too.
func (p *pauseWatch) refresh(ctx context.Context) {
	pipe := p.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(p.queues))
	for i, q := range p.queues {
		cmds[i] = pipe.Exists(ctx, delivery.PausedKey(q))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if ctx.Err() == nil {
			p.log.Debug("pause_read_failed", "err", err)
		}
		return
	}
	open := make([]string, 0, len(p.queues))
	for i, q := range p.queues {
		if cmds[i].Val() == 0 {
			open = append(open, q)
		}
	}
	if prev := *p.open.Load(); !slices.Equal(prev, open) {
		p.log.Info("queues_open_changed", "open", open, "served", p.queues)
	}
	p.open.Store(&open)
}

// openQueues returns the served queues not paused at the last read.
func (p *pauseWatch) openQueues() []string { return *p.open.Load() }
