package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// StreamCursor is where a follower of a run's stream and events stands:
// the last stream id and event id it has read ("0": none yet).
type StreamCursor struct {
	Thread, Run   string
	Stream, Event string
}

// WaitStream reads what follows c in the run's stream and in its events,
// in one XREAD (the keys share the run's slot), waiting up to block when
// both have nothing new; block must be positive. Following the events too
// lets a follower learn that the run ended (a run_finished event) the
// moment it does, with no polling. It returns the new entries and events
// and c moved past them; nothing and no error when block passed.
//
// The read holds one pooled connection for up to block whatever ctx does
// (go-redis does not interrupt a blocking read): share it among the
// readers of a run, as runner/admin does.
func (s *Store) WaitStream(ctx context.Context, c StreamCursor, count int64, block time.Duration) ([]StreamEntry, []Event, StreamCursor, error) {
	if block <= 0 {
		return nil, nil, c, errors.New("fence: WaitStream: block must be positive")
	}
	if dl, ok := ctx.Deadline(); ok {
		block = min(block, time.Until(dl))
	}
	streams, err := s.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{s.keys.Stream(c.Thread, c.Run), s.keys.Events(c.Thread, c.Run), c.Stream, c.Event},
		Count:   count, Block: max(block, time.Millisecond)}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil, c, nil
	case err != nil:
		return nil, nil, c, fmt.Errorf("stream %s: %w", c.Run, err)
	}
	var entries []StreamEntry
	var events []Event
	for _, st := range streams {
		if len(st.Messages) == 0 {
			continue
		}
		last := st.Messages[len(st.Messages)-1].ID
		if st.Stream == s.keys.Stream(c.Thread, c.Run) {
			entries, c.Stream = streamEntries(st.Messages), last
		} else {
			events, c.Event = eventsOf(st.Messages), last
		}
	}
	return entries, events, c, nil
}

// StreamTail returns the id of the newest entry of the run's stream and of
// its events ("0" for an empty or missing stream), where a follower that
// wants only what comes next starts.
func (s *Store) StreamTail(ctx context.Context, thread, run string) (StreamCursor, error) {
	c := StreamCursor{Thread: thread, Run: run, Stream: "0", Event: "0"}
	pipe := s.rdb.Pipeline()
	st := pipe.XRevRangeN(ctx, s.keys.Stream(thread, run), "+", "-", 1)
	ev := pipe.XRevRangeN(ctx, s.keys.Events(thread, run), "+", "-", 1)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return c, fmt.Errorf("stream %s: %w", run, err)
	}
	if m := st.Val(); len(m) > 0 {
		c.Stream = m[0].ID
	}
	if m := ev.Val(); len(m) > 0 {
		c.Event = m[0].ID
	}
	return c, nil
}
