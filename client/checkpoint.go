package client

import (
	"context"
	"maps"
	"slices"

	"github.com/batonrun/baton/fence"
)

// Thread returns the thread: its active run, the runs queued behind it and
// the newest checkpoint version of each namespace. A thread with no run and
// no checkpoint is fence.ErrNotFound.
func (c *Client) Thread(ctx context.Context, thread string) (*fence.ThreadInfo, error) {
	info, err := c.store.Thread(ctx, thread)
	return info, c.explain(ctx, opRead, "", "", thread, err)
}

// Namespaces lists the thread's checkpoint namespaces, sorted. The CLI and
// the HTTP API read a thread's checkpoints without a namespace the same
// way: the root namespace ("") when there is none, the only one when there
// is one, and they ask for one when there are several.
func (c *Client) Namespaces(ctx context.Context, thread string) ([]string, error) {
	info, err := c.Thread(ctx, thread)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(info.Checkpoints)), nil
}

// LatestCheckpoint returns the newest checkpoint of thread in ns, or an
// error matching fence.ErrNoCheckpoint.
func (c *Client) LatestCheckpoint(ctx context.Context, thread, ns string) (*fence.Checkpoint, error) {
	cp, err := c.store.LatestCheckpoint(ctx, thread, ns)
	return cp, c.explain(ctx, opRead, "", "", thread, err)
}

// Checkpoints lists up to limit checkpoints of thread in ns, newest first,
// with versions below before (0: from the newest). next is the before of
// the following page, 0 when there is none.
func (c *Client) Checkpoints(ctx context.Context, thread, ns string, before int64, limit int) (list []fence.Checkpoint, next int64, err error) {
	list, next, err = c.store.Checkpoints(ctx, thread, ns, before, limit)
	return list, next, c.explain(ctx, opRead, "", "", thread, err)
}
