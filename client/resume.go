package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/batonrun/baton/fence"
)

// Resume answers the wait of a parked node with value (JSON) and enqueues
// its next attempt, which reads the value (Task.ResumeValue). waitID names
// the wait answered; empty: the one the node is parked on now. A second
// resume of the same wait changes nothing and returns the first answer
// (Replay). A node that is not waiting is fence.ErrNotWaiting; a cancelled
// or finished run fence.ErrRunDone. If the enqueue fails after the resume
// was stored, the sweeper delivers the node; the error is still returned.
func (c *Client) Resume(ctx context.Context, run, node, waitID string, value json.RawMessage) (fence.Resumed, error) {
	if n := len(value); n > c.limits.MaxInputBytes {
		return fence.Resumed{}, fmt.Errorf("resume %s/%s: value %d bytes, at most %d: %w", run, node, n, c.limits.MaxInputBytes, fence.ErrTooLarge)
	}
	res, err := c.store.Resume(ctx, run, node, waitID, value, "client")
	if err != nil {
		return res, c.explain(ctx, opResume, run, node, "", err)
	}
	if res.Queue == "" {
		return res, nil // a Replay whose node runs or ran already: nothing to deliver
	}
	ref := fence.NodeRef{Thread: res.Thread, Run: run, Node: node}
	if err := c.queue.Enqueue(ctx, ref, res.Queue, res.Attempt+1, time.Time{}); err != nil {
		return res, fmt.Errorf("run %s node %s resumed; the sweeper will deliver it: %w", run, node, err)
	}
	return res, nil
}
