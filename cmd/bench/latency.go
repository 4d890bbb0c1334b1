package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// latency is a go-redis hook that delays every round trip (a command or a
// pipeline) by its duration: Redis across a network, in user space, for both
// systems alike.
type latency time.Duration

func (d latency) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d latency) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(time.Duration(d))
		return next(ctx, cmd)
	}
}

func (d latency) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		time.Sleep(time.Duration(d))
		return next(ctx, cmds)
	}
}
