package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
)

// PauseQueue pauses queue as Asynq's pause does (its web UI's, too): no
// runner starts a node of it, neither from a delivery nor by continuing a
// chain (within a quarter second of the pause), until UnpauseQueue. A
// running node goes on. It reports whether the queue was running until
// now.
func (c *Client) PauseQueue(ctx context.Context, queue string) (bool, error) {
	if err := fence.ValidateID("queue", queue); err != nil {
		return false, err
	}
	return delivery.Pause(ctx, c.store.Redis(), queue)
}

// UnpauseQueue resumes a paused queue and reports whether it was paused.
func (c *Client) UnpauseQueue(ctx context.Context, queue string) (bool, error) {
	if err := fence.ValidateID("queue", queue); err != nil {
		return false, err
	}
	return delivery.Unpause(ctx, c.store.Redis(), queue)
}

// PausedQueues returns those of queues that are paused, sorted.
func (c *Client) PausedQueues(ctx context.Context, queues []string) ([]string, error) {
	paused, err := delivery.Paused(ctx, c.store.Redis(), queues)
	if err != nil {
		return nil, err
	}
	var out []string
	for q, p := range paused {
		if p {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out, nil
}

// pausedWaiting is a READY node's Waiting text when its queue is paused.
func pausedWaiting(queue string) string {
	return fmt.Sprintf("waiting: queue %s is paused (enqueue unpause %s)", queue, queue)
}

// readyPaused reads which queues of the READY nodes are paused: none read
// when no node is READY.
func (c *Client) readyPaused(ctx context.Context, nodes []fence.NodeInfo) (map[string]bool, error) {
	var queues []string
	for _, n := range nodes {
		if q := cmp.Or(n.Queue, "default"); n.State == "READY" && !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	if len(queues) == 0 {
		return nil, nil
	}
	return delivery.Paused(ctx, c.store.Redis(), queues)
}
