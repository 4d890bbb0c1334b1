package runner

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A run's submit and the Asynq enqueue of its first node share one round
// trip. Asynq has no way to take a command of baton's along, but its
// client enqueues with one EVALSHA through the redis client it is given,
// and a context reaches that call. So the Client gives Asynq a tripClient,
// and Submit hands fence a submitTrip as the submit script's Scripter:
//
//	fence: submit script --EvalSha--> submitTrip: Asynq enqueue (ctx carries the script)
//	         --EvalSha--> tripClient: one pipeline [submit script, Asynq's enqueue]
//
// The submit comes first on the one connection, so the node's task is
// never there before the node: a worker that dequeues it at once finds it
// READY. Only a run that starts at once is sent this way: no start time,
// and a thread with no active run when fence read it (its first node is
// READY as soon as the script ends), on one server (a cluster client would
// send the two to different masters, in no set order). A resubmit, a
// refused submit or a run queued behind one that started meanwhile
// enqueues that node's first attempt as well: that delivery claims nothing
// (the node is not READY, or not there), as any redelivery, and the
// node's own enqueue comes when it is READY.

// carried is a command that goes along with the next EVALSHA made under
// its context.
type carried struct {
	cmd  *redis.Cmd
	sent bool
}

type carriedKey struct{}

// tripClient is the redis client the Client's Asynq client uses: an
// EVALSHA made under a context carrying a command sends that command
// first, in the same pipeline; any other call goes as it is.
type tripClient struct{ redis.UniversalClient }

func (c tripClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	cr, _ := ctx.Value(carriedKey{}).(*carried)
	if cr == nil || cr.sent {
		return c.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	cr.sent = true
	pipe := c.Pipeline()
	_ = pipe.Process(ctx, cr.cmd)
	cmd := pipe.EvalSha(ctx, sha, keys, args...)
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmd
}

// submitTrip is the Scripter a run's submit script goes through when the
// enqueue of its first node takes it along (see above).
type submitTrip struct {
	redis.UniversalClient                                 // what is not carried goes here: EVAL after NOSCRIPT, a second try
	enqueue               func(ctx context.Context) error // enqueues the first node
	used                  bool

	// delivered says the first node's task was enqueued after its node
	// was stored: in the same pipeline, behind a script that ran.
	delivered bool
	// early says the script did not run in the trip while Asynq's enqueue
	// may have: the task may have come before its node, and a worker may
	// have taken it and found nothing to claim.
	early bool
}

func (t *submitTrip) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if t.used {
		// A second try (the thread's active run changed since it was
		// read): the first stored nothing, yet its node's task went.
		t.delivered, t.early = false, true
		return t.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	t.used = true
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", sha, len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	cr := &carried{cmd: redis.NewCmd(ctx, argv...)}
	enqueueErr := t.enqueue(context.WithValue(ctx, carriedKey{}, cr))
	if !cr.sent {
		// Asynq failed before its EVALSHA, or no longer enqueues with
		// one (then its task came first): the script goes alone, and
		// Submit enqueues the node after it.
		t.early = enqueueErr == nil
		_ = t.UniversalClient.Process(ctx, cr.cmd)
		return cr.cmd
	}
	// A script that did not run (NOSCRIPT after a Redis restart, a lost
	// connection) is sent again by fence, and Submit enqueues its node
	// again after it.
	t.delivered = enqueueErr == nil && cr.cmd.Err() == nil
	t.early = cr.cmd.Err() != nil
	return cr.cmd
}

// A node's last commit and Asynq's acknowledgement of its task share one
// round trip too. Asynq acknowledges a task (its done script; requeue,
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
