package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/batonrun/baton/fence"
)

// waitRead bounds one blocking read of Wait: a cancelled ctx is noticed
// within it (go-redis does not interrupt a blocking read).
const waitRead = time.Second

// Wait blocks until run has ended and returns it as it ended, with its
// nodes (as Status does). It follows the run's events, a blocking read
// with no polling, so it returns as soon as the run_finished event is
// written. A QUEUED run, a delayed one and one with a node WAITING for a
// person are waited for like any other. An unknown run is
// fence.ErrNotFound at once; when ctx ends first, the error wraps its
// cause, within about a second.
func (c *Client) Wait(ctx context.Context, run string) (*fence.RunInfo, error) {
	f, err := c.Follow(ctx, run, "")
	if err != nil {
		return nil, err
	}
	if State(f.Status()).Ended() {
		return c.Status(ctx, run)
	}
	f.Wait = waitRead
	for {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait for run %s: %w", run, context.Cause(ctx))
		}
		_, err := f.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("wait for run %s: %w", run, context.Cause(ctx))
			}
			return nil, fmt.Errorf("wait for run %s: %w", run, err)
		}
	}
	return c.Status(ctx, run)
}
