package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonrun/baton/fence"
)

// TaskType is the Asynq task type of every node delivery.
const TaskType = "baton:node"

// DefaultQueue is the Asynq queue of nodes that name none.
const DefaultQueue = "default"

// payload is what Asynq carries: only which node to claim. The node's input
// and state live in Redis; delivery is a trigger, never authority.
type payload struct {
	Thread string `json:"thread"`
	Run    string `json:"run"`
	Node   string `json:"node"`
}

func decodePayload(b []byte) (fence.NodeRef, error) {
	var p payload
	if err := json.Unmarshal(b, &p); err != nil {
		return fence.NodeRef{}, fmt.Errorf("payload is not JSON: %w", err)
	}
	for _, f := range []struct{ name, id string }{{"thread", p.Thread}, {"run", p.Run}, {"node", p.Node}} {
		if err := fence.ValidateID("payload "+f.name, f.id); err != nil {
			return fence.NodeRef{}, err
		}
	}
	return fence.NodeRef{Thread: p.Thread, Run: p.Run, Node: p.Node}, nil
}

// TaskID is deterministic per node attempt ("run:node:attempt"), so a second
// enqueue of the same attempt is refused by Asynq instead of stacking a
// duplicate.
func TaskID(n fence.NodeRef, attempt int64) string {
	return n.Run + ":" + n.Node + ":" + strconv.FormatInt(attempt, 10)
}

// enqueuer puts node deliveries on Asynq.
type enqueuer struct{ client *asynq.Client }

// enqueue delivers the node's next attempt (nextAttempt = stored attempt +
// 1) on queue at processAt (zero: now). An attempt that is already queued
// is not an error.
func (e enqueuer) enqueue(ctx context.Context, n fence.NodeRef, queue string, nextAttempt int64, processAt time.Time) error {
	_, err := e.enqueueNew(ctx, n, queue, nextAttempt, processAt)
	return err
}

// enqueueNew is enqueue that also says whether a new task was queued (false:
// that attempt was queued already).
func (e enqueuer) enqueueNew(ctx context.Context, n fence.NodeRef, queue string, nextAttempt int64, processAt time.Time) (bool, error) {
	b, _ := json.Marshal(payload{Thread: n.Thread, Run: n.Run, Node: n.Node}) // cannot fail: strings only
	opts := []asynq.Option{
		asynq.TaskID(TaskID(n, nextAttempt)),
		asynq.Queue(queue),
		// Asynq retries only when baton's state could not be reached;
		// node attempts are counted by baton, not here.
		asynq.MaxRetry(1000),
		// Node timeouts are baton's; this only keeps Asynq's 30-minute
		// default from cancelling a long node.
		asynq.Timeout(7 * 24 * time.Hour),
	}
	if !processAt.IsZero() {
		opts = append(opts, asynq.ProcessAt(processAt))
	}
	_, err := e.client.EnqueueContext(ctx, asynq.NewTask(TaskType, b), opts...)
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("enqueue %s attempt %d: %w", n, nextAttempt, err)
	}
	return true, nil
}
