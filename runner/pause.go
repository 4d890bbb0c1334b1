package runner

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// pauseEvery is how often a worker reads which of its queues are paused.
// Asynq itself stops delivering from a paused queue at once; a chain that
// a commit continues in-process does not go through Asynq, so the worker
// stops continuing on a paused queue within this period of the pause.
const pauseEvery = 250 * time.Millisecond

// PausedKey is the key Asynq (v0.26, internal/base.PausedKey) sets while a
// queue is paused: by Inspector.PauseQueue, enqueue pause, or the Asynq
// web UI. A test pins it against Asynq's Inspector.
func PausedKey(queue string) string { return "asynq:{" + queue + "}:paused" }

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
		cmds[i] = pipe.Exists(ctx, PausedKey(q))
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

// pauseQueue pauses queue as Asynq's Inspector.PauseQueue does (the key holds
// the time of the pause, Unix seconds) and reports whether it was running
// until now (false: paused already).
func pauseQueue(ctx context.Context, rdb redis.UniversalClient, queue string) (bool, error) {
	ok, err := rdb.SetNX(ctx, PausedKey(queue), time.Now().Unix(), 0).Result()
	if err != nil {
		return false, fmt.Errorf("pause queue %s: %w", queue, err)
	}
	return ok, nil
}

// unpauseQueue resumes queue and reports whether it was paused.
func unpauseQueue(ctx context.Context, rdb redis.UniversalClient, queue string) (bool, error) {
	n, err := rdb.Del(ctx, PausedKey(queue)).Result()
	if err != nil {
		return false, fmt.Errorf("resume queue %s: %w", queue, err)
	}
	return n > 0, nil
}

// pausedQueues returns which of queues are paused, in one round trip.
func pausedQueues(ctx context.Context, rdb redis.UniversalClient, queues []string) (map[string]bool, error) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.Exists(ctx, PausedKey(q))
	}
	if len(queues) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("read paused queues: %w", err)
		}
	}
	out := make(map[string]bool, len(queues))
	for i, q := range queues {
		out[q] = cmds[i].Val() > 0
	}
	return out, nil
}
