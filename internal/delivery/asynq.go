package delivery

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batonrun/baton/internal/pbwire"
)

// Asynq's Redis layout (v0.26, internal/base), which Enqueuer writes and
// RedeliverStuck reads without linking Asynq: its client pulls in the
// reflection-based protobuf runtime, which with the OTLP protos made up
// 1.8 MB of the 14.2 MB enqueue binary. enqueue_test.go holds each of
// these against Asynq itself: a task written here is read back by Asynq's
// Inspector and run by its Server, and its message is byte for byte the
// one Asynq's client writes.

// allQueues is the set of every queue name Asynq has seen.
const allQueues = "asynq:queues"

// queuePrefix starts every key of queue: one hash tag per queue, so a
// task's keys share a Redis Cluster slot.
func queuePrefix(queue string) string { return "asynq:{" + queue + "}:" }

func taskKey(queue, id string) string  { return queuePrefix(queue) + "t:" + id }
func pendingKey(queue string) string   { return queuePrefix(queue) + "pending" }
func scheduledKey(queue string) string { return queuePrefix(queue) + "scheduled" }

// The fields of Asynq's TaskMessage (internal/proto/asynq.proto) that a
// node delivery sets; the others keep their zero value, which proto3
// leaves out.
const (
	msgType    protowire.Number = 1
	msgPayload protowire.Number = 2
	msgID      protowire.Number = 3
	msgQueue   protowire.Number = 4
	msgRetry   protowire.Number = 5
	msgTimeout protowire.Number = 8
)

// Asynq retries a delivery only when baton's state could not be reached
// (node attempts are counted by baton, not by Asynq), and a node's timeout
// is baton's: taskTimeout only keeps Asynq's 30-minute default from
// cancelling a long node. No deadline is set.
const (
	taskMaxRetry = 1000
	taskTimeout  = 7 * 24 * 3600 // seconds
)

// taskMessage encodes a node delivery as Asynq's TaskMessage, fields in
// number order as the protobuf runtime writes them (an empty payload is
// left out, as proto3 does).
func taskMessage(id, queue string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(TaskType)+len(payload)+len(id)+len(queue))
	b = pbwire.String(b, msgType, TaskType)
	b = pbwire.Bytes(b, msgPayload, payload)
	b = pbwire.String(b, msgID, id)
	b = pbwire.String(b, msgQueue, queue)
	b = pbwire.Varint(b, msgRetry, taskMaxRetry)
	return pbwire.Varint(b, msgTimeout, taskTimeout)
}
