package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"
)

// partition is a go-redis hook that cuts one client off from Redis, as a
// network partition or a stopped process would: while it is cut, every
// command, pipeline and dial waits until it heals, or fails when its own
// context ends first. Each worker has its own client, so cutting one leaves
// the others untouched.
type partition struct {
	mu     sync.Mutex
	healed chan struct{} // nil while connected
}

var _ redis.Hook = (*partition)(nil)

var errPartitioned = errors.New("network partition")

// cut disconnects the client; a no-op if it is cut already.
func (p *partition) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil {
		p.healed = make(chan struct{})
	}
}

// heal reconnects the client and lets every waiting command through.
func (p *partition) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
}

func (p *partition) wait(ctx context.Context) error {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	if healed == nil {
		return nil
	}
	select {
	case <-healed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errPartitioned, context.Cause(ctx))
	}
}

func (p *partition) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := p.wait(ctx); err != nil {
			return nil, err
		}
		return next(ctx, network, addr)
	}
}

func (p *partition) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := p.wait(ctx); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (p *partition) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := p.wait(ctx); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}
