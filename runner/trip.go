package runner

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node's last commit and Asynq's acknowledgement of its task share one
// round trip, as a run's submit and its first enqueue do (client/trip.go). Asynq acknowledges a task (its done script; requeue,
// retry or archive in the paths where the handler's answer does not
// count) once the handler has returned, through the redis client its
// server was given, with the task's id as the script's first argument. A
// handler whose node has no dependents (nothing for its commit to enqueue
// or continue with) leaves its commit with the worker's acks under that
// id and returns nil; the server's ackClient finds it there when the
// acknowledgement comes and sends the two in one pipeline, the commit
// first:
//
//	handler: acks.hold(task id, commit) ; return nil
//	Asynq: done script, first argument the task id --EvalSha--> ackClient:
//	         commit (fence.CommitVia) --EvalSha--> ackTrip: one pipeline [commit, done]
//
// The commit is the one it would have been: the same claim, the same
// retries with the same identity when its reply is lost (they go alone),
// the script deciding whether it counts. An acknowledgement that never
// comes (Asynq lost its own lease on the task, or gave up on shutdown
// before answering) leaves the commit to a timer, which sends it alone
// well within the node's lease. Until then the commit counts as a running
// handler: Shutdown waits for it.

// acks holds the commits that wait for their task's acknowledgement.
type acks struct {
	after time.Duration // how long a commit waits before it goes alone

	mu      sync.Mutex
	pending map[string]*heldCommit // by Asynq task id
}

// heldCommit is a commit waiting for its task's acknowledgement. send
// makes it through via (nil: alone), handles its outcome, and is called
// once.
type heldCommit struct {
	send  func(via redis.Scripter)
	timer *time.Timer
}

func newAcks(after time.Duration) *acks {
	return &acks{after: after, pending: map[string]*heldCommit{}}
}

// hold keeps send for taskID's acknowledgement. It reports false, and
// keeps nothing, when a commit for that task is held already.
func (a *acks) hold(taskID string, send func(via redis.Scripter)) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.pending[taskID]; dup {
		return false
	}
	h := &heldCommit{send: send}
	a.pending[taskID] = h
	h.timer = time.AfterFunc(a.after, func() {
		if a.take(taskID, h) != nil {
			h.send(nil)
		}
	})
	return true
}

// take removes and returns the commit held for taskID (only h, when h is
// not nil), or nil.
func (a *acks) take(taskID string, h *heldCommit) *heldCommit {
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.pending[taskID]
	if got == nil || (h != nil && got != h) {
		return nil
	}
	delete(a.pending, taskID)
	return got
}

// dropAll forgets every held commit, as a crash would, and says how many.
func (a *acks) dropAll() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.pending)
	for id, h := range a.pending {
		h.timer.Stop()
		delete(a.pending, id)
	}
	return n
}

// ackClient is the redis client of a worker's Asynq servers: an EVALSHA
// whose first argument is the id of a task with a held commit carries
// that commit.
type ackClient struct {
	redis.UniversalClient
	acks *acks
}

func (c ackClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if id, ok := firstArg(args); ok {
		if h := c.acks.take(id, nil); h != nil {
			h.timer.Stop()
			// Asynq acknowledges on a goroutine of its own, per task,
			// whose stack the commit would grow by doubling.
			presizeStack()
			t := &ackTrip{UniversalClient: c.UniversalClient, sha: sha, keys: keys, args: args}
			h.send(t)
			if t.ack != nil {
				return t.ack
			}
			// The commit did not go through the trip (fence sends
			// a replicated commit on a connection of its own).
		}
	}
	return c.UniversalClient.EvalSha(ctx, sha, keys, args...)
}

func firstArg(args []any) (string, bool) {
	if len(args) == 0 {
		return "", false
	}
	s, ok := args[0].(string)
	return s, ok
}

// ackTrip is the Scripter a held commit is sent through: its first
// EVALSHA goes in one pipeline with the acknowledgement (sha, keys, args),
// after it; a retry goes alone.
type ackTrip struct {
	redis.UniversalClient            // a retry, and EVAL after NOSCRIPT
	sha                   string     // the acknowledgement: script,
	keys                  []string   // its keys
	args                  []any      // and arguments
	ack                   *redis.Cmd // the acknowledgement's reply, once sent
}

func (t *ackTrip) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if t.ack != nil {
		return t.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	pipe := t.UniversalClient.Pipeline()
	commit := pipe.EvalSha(ctx, sha, keys, args...)
	t.ack = pipe.EvalSha(ctx, t.sha, t.keys, t.args...)
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return commit
}
