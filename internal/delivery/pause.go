package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// PausedKey is the key Asynq (v0.26, internal/base.PausedKey) sets while a
// queue is paused: by Inspector.PauseQueue, enqueue pause, or the Asynq
// web UI. Asynq delivers nothing from a paused queue; the runtime does not
// continue a chain onto one either. A test pins it against Asynq's
// Inspector.
func PausedKey(queue string) string { return queuePrefix(queue) + "paused" }

// Pause pauses queue as Asynq's Inspector.PauseQueue does (the key holds
// the time of the pause, Unix seconds) and reports whether it was running
// until now (false: paused already).
func Pause(ctx context.Context, rdb redis.UniversalClient, queue string) (bool, error) {
	ok, err := rdb.SetNX(ctx, PausedKey(queue), time.Now().Unix(), 0).Result()
	if err != nil {
		return false, fmt.Errorf("pause queue %s: %w", queue, err)
	}
	return ok, nil
}

// Unpause resumes queue and reports whether it was paused.
func Unpause(ctx context.Context, rdb redis.UniversalClient, queue string) (bool, error) {
	n, err := rdb.Del(ctx, PausedKey(queue)).Result()
	if err != nil {
		return false, fmt.Errorf("resume queue %s: %w", queue, err)
	}
	return n > 0, nil
}

// Paused returns which of queues are paused, in one round trip.
func Paused(ctx context.Context, rdb redis.UniversalClient, queues []string) (map[string]bool, error) {
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
