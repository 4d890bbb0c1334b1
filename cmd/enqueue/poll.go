package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonrun/baton/fence"
)

// outage lets the live commands (events --follow, watch) ride out a short
// Redis outage such as a failover, and give up on a long one. A missing
// run is never transient.
type outage struct {
	log   *slog.Logger
	since time.Time
}

// maxOutage is how long the live commands keep retrying.
const maxOutage = 30 * time.Second

// failed returns err when it should end the command, nil to retry.
func (o *outage) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if isPermanent(err) {
		return err
	}
	if o.since.IsZero() {
		o.since = time.Now()
	}
	if d := time.Since(o.since); d > maxOutage {
		return fmt.Errorf("gave up after %s of failures: %w", d.Round(time.Second), err)
	}
	o.log.Warn("poll_failed", "err", err)
	return nil
}

func (o *outage) ok() { o.since = time.Time{} }

// isPermanent: bad input or a missing run; retrying cannot help.
func isPermanent(err error) bool {
	return exitCode(err) == 2 || errors.Is(err, fence.ErrNotFound)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
