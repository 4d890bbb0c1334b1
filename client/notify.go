package client

import (
	"context"
	"errors"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// storeRun stores a run with its webhook, if it has one, as one operation.
// The webhook is recorded first (fence.ArmNotify), so that no run that
// ends is missed; a record this call created is taken back when the store
// refuses the run for good (a conflict or a busy thread). After any other
// error the run may have been stored, so the record stays (a pending
// entry whose run never appears is dropped after a while).
func (c *Client) storeRun(ctx context.Context, args fence.SubmitArgs, notify *spec.Notify) (fence.SubmitResult, error) {
	if notify == nil {
		return c.store.Submit(ctx, args)
	}
	thread := args.Thread
	if thread == "" {
		thread = args.Run
	}
	created, err := c.store.ArmNotify(ctx, thread, args.Run, notify.URL)
	if err != nil {
		return fence.SubmitResult{}, err
	}
	res, err := c.store.Submit(ctx, args)
	if created && (errors.Is(err, fence.ErrRunConflict) || errors.Is(err, fence.ErrThreadBusy)) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = c.store.DisarmNotify(dctx, thread, args.Run)
	}
	return res, err
}
