package client

import (
	"context"

	"github.com/batonrun/baton/fence"
)

// Delete removes an ended run (SUCCEEDED, FAILED or CANCELLED) at once:
// its nodes, events and listing entry, in one script
// (fence.Store.DeleteRun); its thread's checkpoints stay. It returns the
// status the run ended with. A run still QUEUED or RUNNING is refused (an
// *Error; errors.Is fence.ErrRunActive): cancel it first.
func (c *Client) Delete(ctx context.Context, run string) (string, error) {
	if err := fence.ValidateID("run id", run); err != nil {
		return "", err
	}
	status, err := c.store.DeleteRun(ctx, run)
	return status, c.explain(ctx, opDelete, run, "", "", err)
}
