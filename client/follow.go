package client

import (
	"context"
	"io"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

// DefaultFollowWait is how long EventFollower.Next waits for an event
// when Wait is zero.
const DefaultFollowWait = 10 * time.Second

// followPage is how many events one read of a follower takes.
const followPage = 500

// EventFollower reads a run's events as they are appended (a blocking
// XREAD, no polling) and tells when the run has ended and every event up
// to its end was read. The admin server's event stream and the CLI's
// `events --follow` and `watch` share it. Not safe for concurrent use.
//
// While it waits, Next holds one of the Redis client's pooled connections
// for up to Wait, even after ctx is cancelled (go-redis does not interrupt
// a blocking read): bound how many follow at once.
type EventFollower struct {
	// Wait bounds one blocking read. Zero value: DefaultFollowWait.
	Wait time.Duration

	store  *fence.Store
	run    string
	after  string
	status string
	ended  bool
}

// Follow starts following run's events after the event id after ("": from
// the first). It reads the run's status once: an unknown run is
// fence.ErrNotFound here, before anything is streamed.
func (c *Client) Follow(ctx context.Context, run, after string) (*EventFollower, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return nil, err
	}
	f := &EventFollower{store: c.store, run: run, after: after}
	if err := f.readStatus(ctx); err != nil {
		return nil, c.explain(ctx, opRead, run, "", "", err)
	}
	return f, nil
}

// Next returns the events after the last one returned, waiting up to Wait
// for the first; no events and no error when none came in that time. Once
// the run has ended and every event up to its end was returned, it
// returns io.EOF (Status then says how the run ended). A run retried
// after it ended may add events after that; a new follower reads them.
func (f *EventFollower) Next(ctx context.Context) ([]fence.Event, error) {
	var (
		evs []fence.Event
		err error
	)
	if f.ended {
		// The status was terminal before this read: the script that ended
		// the run appended run_finished in the same step, so this read
		// reaches the end.
		evs, err = f.store.Events(ctx, f.run, f.after, followPage)
	} else {
		evs, err = f.store.WaitEvents(ctx, f.run, f.after, followPage, f.wait())
	}
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		if f.ended {
			return nil, io.EOF
		}
		// Nothing for a while: the run may have ended before we started.
		return nil, f.readStatus(ctx)
	}
	f.after = evs[len(evs)-1].ID
	for _, e := range evs {
		if e.Type == "run_finished" && !f.ended {
			// Read on without waiting from now: what follows the end
			// is already in the stream. A failed read only delays the
			// end: the next empty read looks again, and reports its
			// own error.
			_ = f.readStatus(ctx)
			break
		}
	}
	return evs, nil
}

// After is the id of the last event returned ("" before the first).
func (f *EventFollower) After() string { return f.after }

// Status is the run's status as last read.
func (f *EventFollower) Status() string { return f.status }

func (f *EventFollower) readStatus(ctx context.Context) error {
	st, err := f.store.RunStatus(ctx, f.run)
	if err != nil {
		return err
	}
	f.status, f.ended = st, delivery.Terminal(st)
	return nil
}

func (f *EventFollower) wait() time.Duration {
	if f.Wait > 0 {
		return f.Wait
	}
	return DefaultFollowWait
}
