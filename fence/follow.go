package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// WaitEvents is Events for followers: it returns up to count events after
// the stream id after ("" or "0": from the start), waiting up to block for
// the first one when there is none yet (XREAD BLOCK). It returns no events
// and no error when block passed without one. block must be positive.
//
// The read holds one of the client's pooled connections for up to block,
// whatever ctx does: go-redis does not interrupt a blocking read when its
// context is cancelled. Callers bound how many follow at once, or give
// followers their own client.
func (s *Store) WaitEvents(ctx context.Context, run, after string, count int64, block time.Duration) ([]Event, error) {
	if block <= 0 {
		return nil, errors.New("fence: WaitEvents: block must be positive")
	}
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return nil, err
	}
	if after == "" {
		after = "0"
	}
	if dl, ok := ctx.Deadline(); ok {
		block = min(block, time.Until(dl))
	}
	// A packed run has ended: its events are all there are, and a stream
	// that does not exist would only be waited on.
	// What is there already, packed or not, in one transaction; only when
	// there is nothing yet, wait on the stream.
	msgs, err := s.eventsAfter(ctx, thread, run, after, count)
	if err != nil {
		return nil, fmt.Errorf("events %s: %w", run, err)
	}
	if len(msgs) > 0 {
		return eventsOf(msgs), nil
	}
	// BLOCK counts milliseconds, and BLOCK 0 waits forever.
	block = max(block, time.Millisecond)
	streams, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{s.keys.Events(thread, run)},
		ID: after, Count: count, Block: block}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil // block passed without an event
	case err != nil:
		return nil, fmt.Errorf("events %s: %w", run, err)
	case len(streams) == 0:
		return nil, nil
	}
	return eventsOf(streams[0].Messages), nil
}

// RunStatus reads a run's status alone (one round trip past the locator),
// for followers that must tell whether it has ended without reading its
// nodes.
func (s *Store) RunStatus(ctx context.Context, run string) (string, error) {
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return "", err
	}
	st, err := s.rdb.HGet(ctx, s.keys.Run(thread, run), "status").Result()
	if errors.Is(err, redis.Nil) {
		p, err := s.packedOf(ctx, thread, run)
		if err != nil {
			return "", err
		}
		if p == nil {
			return "", fmt.Errorf("run %s: %w", run, ErrNotFound)
		}
		return p.Run["status"], nil
	}
	if err != nil {
		return "", fmt.Errorf("run %s: %w", run, err)
	}
	return st, nil
}

// eventsOf decodes a run's stream entries into Events.
func eventsOf(msgs []redis.XMessage) []Event {
	out := make([]Event, 0, len(msgs))
	for _, m := range msgs {
		e := Event{ID: m.ID, Details: map[string]string{}}
		for k, v := range m.Values {
			sv := asString(v)
			switch k {
			case "type":
				e.Type = sv
			case "node":
				e.Node = sv
			case "epoch":
				e.Epoch = asInt(sv)
			case "worker":
				e.Worker = sv
			case "at":
				e.At = msTime(sv)
			default:
				e.Details[k] = sv
			}
		}
		out = append(out, e)
	}
	return out
}
