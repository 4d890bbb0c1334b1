package runner

import (
	"context"

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
// READY. Only a run without a thread and without a start time is sent this
// way (its first node is READY as soon as the script ends, on one server:
// a cluster client would send the two to different masters, in no set
// order), and it is what a resubmit or a refused submit enqueues as well:
// that delivery then claims nothing (the node is not READY, or not there),
// as any redelivery.

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
	redis.Scripter                                 // for what is not carried: EVAL after NOSCRIPT
	rdb            redis.UniversalClient           // sends the script when Asynq did not take it
	enqueue        func(ctx context.Context) error // enqueues the first node
	used           bool

	// delivered says the first node's task was enqueued after its node
	// was stored: in the same pipeline, behind a script that ran.
	delivered bool
	// enqueueErr is the enqueue's error, for Submit to report.
	enqueueErr error
}

func (t *submitTrip) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if t.used { // a second try: the script alone
		return t.Scripter.EvalSha(ctx, sha, keys, args...)
	}
	t.used = true
	argv := make([]any, 0, 3+len(keys)+len(args))
	argv = append(argv, "evalsha", sha, len(keys))
	for _, k := range keys {
		argv = append(argv, k)
	}
	argv = append(argv, args...)
	cr := &carried{cmd: redis.NewCmd(ctx, argv...)}
	t.enqueueErr = t.enqueue(context.WithValue(ctx, carriedKey{}, cr))
	if !cr.sent {
		// Asynq failed before its EVALSHA, or no longer enqueues with
		// one: the script goes alone, and Submit enqueues the node after.
		_ = t.rdb.Process(ctx, cr.cmd)
		return cr.cmd
	}
	// A script that did not run (NOSCRIPT after a Redis restart, a lost
	// connection) is sent again by fence; its node's task may have come
	// first, so Submit enqueues it again after (a task still waiting is
	// not enqueued twice).
	t.delivered = t.enqueueErr == nil && cr.cmd.Err() == nil
	return cr.cmd
}
