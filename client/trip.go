package client

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A run's submit and the enqueue of its first node's delivery share one
// round trip. The delivery enqueuer (internal/delivery) enqueues with one
// EVALSHA through the redis client it is given, and a context reaches
// that call. So the Client gives it a tripClient, and Submit hands fence a
// submitTrip as the submit script's Scripter:
//
//	fence: submit script --EvalSha--> submitTrip: enqueue (ctx carries the script)
//	         --EvalSha--> tripClient: one pipeline [submit script, enqueue script]
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

// tripClient is the redis client the Client's enqueuer uses: an
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
	// early says the script did not run in the trip while the enqueue
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
		// The enqueue failed before its EVALSHA, or no longer enqueues
		// with one (then its task came first): the script goes alone, and
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
