package client

import (
	"context"
	"io"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

// streamPage is how many entries one read of a StreamFollower takes.
const streamPage = 512

// ReadStream returns up to count entries (0: all) of run's stream after the
// stream id after ("", "0" or "-1": from the start), without waiting: the
// chunks its attempts streamed (fence.Store.AppendStream). An unknown run
// is fence.ErrNotFound.
func (c *Client) ReadStream(ctx context.Context, run, after string, count int64) ([]fence.StreamEntry, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return nil, err
	}
	es, err := c.store.ReadStream(ctx, run, after, count, 0)
	if err != nil {
		return nil, c.explain(ctx, opRead, run, "", "", err)
	}
	return es, nil
}

// StreamFollower reads a run's stream as its attempts append to it (one
// blocking XREAD of the stream and the run's events together, no
// polling) and tells when the run has ended and every entry was read.
// `enqueue stream` uses it. Not safe for concurrent use.
//
// While it waits, Next holds one of the Redis client's pooled connections
// for up to Wait, even after ctx is cancelled: bound how many follow at
// once (the admin server shares one reader per run among its clients).
type StreamFollower struct {
	// Wait bounds one blocking read. Zero value: DefaultFollowWait.
	Wait time.Duration

	store  *fence.Store
	cur    fence.StreamCursor
	status string
	ended  bool
}

// FollowStream starts following run's stream after the stream id after
// ("", "0" or "-1": from the start). An unknown run is fence.ErrNotFound
// here, before anything is read.
func (c *Client) FollowStream(ctx context.Context, run, after string) (*StreamFollower, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return nil, err
	}
	if !fence.ValidStreamID(after) {
		_, err := c.store.ReadStream(ctx, run, after, 1, 0) // says what is wrong with after
		return nil, err
	}
	if after == "" || after == "-1" {
		after = "0"
	}
	thread, err := c.store.Locate(ctx, run)
	if err != nil {
		return nil, c.explain(ctx, opRead, run, "", "", err)
	}
	// Only events from now on matter (a run_finished); the status read
	// after this covers an end before it.
	tail, err := c.store.StreamTail(ctx, thread, run)
	if err != nil {
		return nil, err
	}
	f := &StreamFollower{store: c.store, cur: fence.StreamCursor{Thread: thread, Run: run, Stream: after, Event: tail.Event}}
	if err := f.readStatus(ctx); err != nil {
		return nil, c.explain(ctx, opRead, run, "", "", err)
	}
	return f, nil
}

// Next returns the entries after the last one returned, waiting up to
// Wait for the first; none and no error when none came in that time. Once
// the run has ended and every entry was returned, it returns io.EOF
// (Status then says how the run ended).
func (f *StreamFollower) Next(ctx context.Context) ([]fence.StreamEntry, error) {
	if f.ended {
		// The run ended before this read: nothing can be appended after
		// its end (every append is fenced by a RUNNING node's claim).
		es, err := f.store.ReadStreamOf(ctx, f.cur.Thread, f.cur.Run, f.cur.Stream, streamPage, 0)
		if err != nil {
			return nil, err
		}
		if len(es) == 0 {
			return nil, io.EOF
		}
		f.cur.Stream = es[len(es)-1].ID
		return es, nil
	}
	wait := f.Wait
	if wait <= 0 {
		wait = DefaultFollowWait
	}
	es, evs, cur, err := f.store.WaitStream(ctx, f.cur, streamPage, wait)
	if err != nil {
		return nil, err
	}
	f.cur = cur
	for _, e := range evs {
		if e.Type == "run_finished" {
			_ = f.readStatus(ctx) // a failed read only delays the end to the next quiet read
			break
		}
	}
	if len(es) == 0 && len(evs) == 0 {
		return nil, f.readStatus(ctx) // quiet: the run may have ended meanwhile
	}
	return es, nil
}

// After is the id of the last entry returned (or the one it started after).
func (f *StreamFollower) After() string { return f.cur.Stream }

// Status is the run's status as last read.
func (f *StreamFollower) Status() string { return f.status }

func (f *StreamFollower) readStatus(ctx context.Context) error {
	st, err := f.store.RunStatus(ctx, f.cur.Run)
	if err != nil {
		return err
	}
	f.status, f.ended = st, delivery.Terminal(st)
	return nil
}
