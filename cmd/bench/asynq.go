package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// asynqScenario is the baseline: a bare asynq.Server whose handler does
// nothing (flat), or enqueues the next task of its chain (chain).
type asynqScenario struct {
	o     options
	t     *target
	chain bool
	srv   *asynq.Server
	cli   *asynq.Client
	p     progress
}

// noopPayload is about the size of a baton delivery's payload.
type noopPayload struct {
	Chain string `json:"chain"`
	Step  int    `json:"step"`
}

const noopType = "bench:noop"

func (s *asynqScenario) system() string { return "asynq" }

func (s *asynqScenario) mode() string {
	if s.chain {
		return fmt.Sprintf("chain k=%d", s.o.k)
	}
	return "flat"
}

func (s *asynqScenario) progress() *progress { return &s.p }

// settled is always true: Asynq (retention 0) deletes a task as it ends.
func (s *asynqScenario) settled(context.Context) (bool, error) { return true, nil }

func (s *asynqScenario) start(_ context.Context) error {
	s.p.reset()
	s.cli = asynq.NewClientFromRedisClient(s.t.rdb)
	s.srv = asynq.NewServerFromRedisClient(s.t.rdb, asynq.Config{
		Concurrency:       s.o.concurrency,
		Queues:            weights(s.t.queues),
		TaskCheckInterval: s.o.poll,
		// As runner.Worker sets it, so both servers do the same background work.
		DelayedTaskCheckInterval: max(s.o.poll, 100*time.Millisecond),
		ShutdownTimeout:          5 * time.Second,
		LogLevel:                 asynq.WarnLevel,
	})
	return s.srv.Start(asynq.HandlerFunc(s.handle))
}

func (s *asynqScenario) stop() {
	s.srv.Shutdown()
	_ = s.cli.Close()
}

func (s *asynqScenario) handle(ctx context.Context, t *asynq.Task) error {
	s.p.delivered()
	if s.chain {
		var p noopPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return fmt.Errorf("payload: %w: %w", err, asynq.SkipRetry)
		}
		if p.Step+1 < s.o.k {
			q, _ := asynq.GetQueueName(ctx) // the chain stays on its queue
			if err := s.enqueue(ctx, q, p.Chain, p.Step+1); err != nil {
				return err
			}
		}
	}
	s.p.done.Add(1)
	return nil
}

func (s *asynqScenario) enqueue(ctx context.Context, q, chain string, step int) error {
	b, _ := json.Marshal(noopPayload{Chain: chain, Step: step}) // cannot fail
	if _, err := s.cli.EnqueueContext(ctx, asynq.NewTask(noopType, b), asynq.Queue(q)); err != nil {
		return fmt.Errorf("enqueue %s/%d: %w", chain, step, err)
	}
	return nil
}

// fill enqueues n tasks (flat), or the first task of each of n/k chains
// (rounded up) whose handlers enqueue the rest.
func (s *asynqScenario) fill(ctx context.Context, tag string, n int) (int, error) {
	heads, nodes := n, n
	if s.chain {
		heads = (n + s.o.k - 1) / s.o.k
		nodes = heads * s.o.k
	}
	err := parallel(ctx, heads, s.o.submitters, func(ctx context.Context, i int) error {
		return s.enqueue(ctx, s.t.queues[i%len(s.t.queues)], fmt.Sprintf("%s-%06d", tag, i), 0)
	})
	return nodes, err
}

// verify checks that every task ran once: Asynq redelivers only on errors
// and lost leases, which a healthy drain has none of.
func (s *asynqScenario) verify(_ context.Context, tag string, nodes int) error {
	if got := s.p.done.Load(); got != int64(nodes) {
		return fmt.Errorf("asynq %s %s: %d handlers ran, want %d", s.mode(), tag, got, nodes)
	}
	return nil
}

// weights gives every queue the same priority.
func weights(queues []string) map[string]int {
	m := make(map[string]int, len(queues))
	for _, q := range queues {
		m[q] = 1
	}
	return m
}
