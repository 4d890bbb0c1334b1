package delivery

import (
	"context"
	_ "embed" // enqueue.lua
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
	"github.com/batonrun/baton/tracing"
)

// TaskType is the Asynq task type of every node delivery.
const TaskType = "baton:node"

// DefaultQueue is the Asynq queue of nodes that name none.
const DefaultQueue = spec.DefaultQueue

// payload is what Asynq carries: only which node to claim. The node's input
// and state live in Redis; delivery is a trigger, never authority.
type payload struct {
	Thread string `json:"thread"`
	Run    string `json:"run"`
	Node   string `json:"node"`
	// Trace is the run's trace context (tracing.Carrier), when it was
	// traced: the delivery's attempt joins the run's trace without a read.
	Trace string `json:"trace,omitempty"`
}

// DecodePayload reads which node a task delivers, refusing ids that could
// not be a node's, and the run's trace context it carries ("" when none).
func DecodePayload(b []byte) (fence.NodeRef, tracing.Carrier, error) {
	var p payload
	if err := json.Unmarshal(b, &p); err != nil {
		return fence.NodeRef{}, "", fmt.Errorf("payload is not JSON: %w", err)
	}
	for _, f := range []struct{ name, id string }{{"payload thread", p.Thread}, {"payload run", p.Run}, {"payload node", p.Node}} {
		if err := fence.ValidateID(f.name, f.id); err != nil {
			return fence.NodeRef{}, "", err
		}
	}
	return fence.NodeRef{Thread: p.Thread, Run: p.Run, Node: p.Node}, tracing.Carrier(p.Trace), nil
}

type runTraceKey struct{}

// WithRunTrace returns ctx carrying the run's trace context, which every
// delivery enqueued under ctx carries on while tracing is on.
func WithRunTrace(ctx context.Context, c tracing.Carrier) context.Context {
	if c == "" {
		return ctx
	}
	return context.WithValue(ctx, runTraceKey{}, c)
}

// RunTraceFrom returns the run's trace context ctx carries, "" when none.
func RunTraceFrom(ctx context.Context) tracing.Carrier {
	c, _ := ctx.Value(runTraceKey{}).(tracing.Carrier)
	return c
}

// TaskID is deterministic per node attempt ("run:node:attempt"), so a second
// enqueue of the same attempt is refused instead of stacking a duplicate.
func TaskID(n fence.NodeRef, attempt int64) string {
	return n.Run + ":" + n.Node + ":" + strconv.FormatInt(attempt, 10)
}

//go:embed enqueue.lua
var enqueueSrc string

// enqueueScript writes a task as Asynq's client does (enqueue.lua).
var enqueueScript = redis.NewScript(enqueueSrc)

// EnqueueScript returns the enqueue script's source, as Redis runs it: a
// tool that names the scripts it sees (the benchmark's round-trip
// counter) hashes it.
func EnqueueScript() string { return enqueueSrc }

// Enqueuer puts node deliveries on Asynq's queues. It writes Asynq's task
// records itself, one script per task (see asynq.go), so that a program
// that only submits runs links neither Asynq nor the protobuf runtime;
// Asynq's servers deliver what it writes. Make one with New.
type Enqueuer struct {
	rdb redis.UniversalClient
	// published holds the queues this Enqueuer added to asynq:queues, as
	// Asynq's client remembers them: the name is written with a queue's
	// first task, not with every task. On one server the enqueue script
	// adds it; on a Redis Cluster, where that set is in another slot than
	// the task, it is added apart, before the task.
	published *sync.Map
	cluster   bool
}

// New returns an Enqueuer over rdb. The enqueue script goes through rdb
// (EVALSHA, and EVAL when Redis lacks it), so a client can carry it in a
// pipeline of its own (package client's submit does).
func New(rdb redis.UniversalClient) Enqueuer {
	_, cluster := rdb.(*redis.ClusterClient)
	return Enqueuer{rdb: rdb, published: &sync.Map{}, cluster: cluster}
}

// Enqueue delivers the node's next attempt (nextAttempt = stored attempt +
// 1) on queue at processAt (zero: now). An attempt that is already queued
// is not an error.
func (e Enqueuer) Enqueue(ctx context.Context, n fence.NodeRef, queue string, nextAttempt int64, processAt time.Time) error {
	_, err := e.EnqueueNew(ctx, n, queue, nextAttempt, processAt)
	return err
}

// EnqueueNew is Enqueue reporting whether the delivery is new (false: that
// attempt's task was there already).
func (e Enqueuer) EnqueueNew(ctx context.Context, n fence.NodeRef, queue string, nextAttempt int64, processAt time.Time) (bool, error) {
	fresh, err := e.EnqueueAs(ctx, TaskID(n, nextAttempt), n, queue, processAt)
	if err != nil {
		return false, fmt.Errorf("enqueue %s attempt %d: %w", n, nextAttempt, err)
	}
	return fresh, nil
}

// EnqueueAs enqueues a delivery of n under the task id id, reporting
// whether it is new (false: a task of that id is there already, as
// Asynq's client refuses it). A task due later than Redis's clock waits
// in the queue's scheduled set until processAt (zero: due now).
func (e Enqueuer) EnqueueAs(ctx context.Context, id string, n fence.NodeRef, queue string, processAt time.Time) (bool, error) {
	if strings.TrimSpace(queue) == "" {
		return false, errors.New("delivery: queue name is empty")
	}
	if id == "" {
		return false, errors.New("delivery: task id is empty")
	}
	p := payload{Thread: n.Thread, Run: n.Run, Node: n.Node}
	if tracing.Enabled() {
		p.Trace = string(RunTraceFrom(ctx)) // the run's trace context, when it has one
	}
	b, _ := json.Marshal(p) // cannot fail: strings only
	keys := []string{taskKey(queue, id), pendingKey(queue), scheduledKey(queue)}
	_, known := e.published.Load(queue)
	switch {
	case known:
	case e.cluster:
		if err := e.rdb.SAdd(ctx, allQueues, queue).Err(); err != nil {
			return false, fmt.Errorf("publish queue %s: %w", queue, err)
		}
		e.published.Store(queue, true)
	default:
		keys = append(keys, allQueues)
	}
	var due int64
	if !processAt.IsZero() {
		due = max(processAt.UnixMilli(), 0)
	}
	n1, err := enqueueScript.Run(ctx, e.rdb, keys, id, taskMessage(id, queue, b), due, queue, fence.NewClaimID()).Int()
	if err != nil {
		return false, fmt.Errorf("enqueue task %s on queue %s: %w", id, queue, err)
	}
	if n1 == 1 && !known {
		e.published.Store(queue, true)
	}
	return n1 == 1, nil
}

// RedeliverStuck handles a node the sweeper finds due although its
// attempt's task is on Asynq already. A pending task waits its turn. An
// active one was dequeued, yet its node is still unclaimed or its lease
// expired: the dequeue's reply was lost, or the server that took it died
// or was cut off before claiming, and Asynq hands such a task back only
// when its own lease runs out (30s or more). Then another delivery is
// enqueued, at most one per window. It reports whether it enqueued one.
func (e Enqueuer) RedeliverStuck(ctx context.Context, n fence.NodeRef, queue string, attempt int64, window time.Duration) (bool, error) {
	id := TaskID(n, attempt)
	state, err := e.rdb.HGet(ctx, taskKey(queue, id), "state").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil // gone since: the next sweep enqueues it afresh
	}
	if err != nil {
		return false, fmt.Errorf("read task %s on queue %s: %w", id, queue, err)
	}
	if state != "active" {
		return false, nil
	}
	slot := time.Now().UnixMilli() / max(window.Milliseconds(), 1)
	return e.EnqueueAs(ctx, id+"~"+strconv.FormatInt(slot, 10), n, queue, time.Time{})
}

// Wake enqueues the deliveries of nodes a freed limit slot was handed to
// (fence.Store.SetWake), each under an id of its own, so it never meets
// the waiting node's earlier task. It returns the error of each node that
// failed to enqueue: the sweeper's recheck of waiting nodes finds those,
// and their slot's hold runs out.
func (e Enqueuer) Wake(ctx context.Context, woken []fence.Woken) map[fence.NodeRef]error {
	var failed map[fence.NodeRef]error
	for _, n := range woken {
		id := TaskID(n.Node, 0) + "~wake-" + fence.NewClaimID()
		if _, err := e.EnqueueAs(ctx, id, n.Node, n.Queue, time.Time{}); err != nil {
			if failed == nil {
				failed = map[fence.NodeRef]error{}
			}
			failed[n.Node] = err
		}
	}
	return failed
}
