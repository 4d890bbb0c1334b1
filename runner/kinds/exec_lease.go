package kinds

import (
	"context"
	"fmt"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// ExitLeaseLost is the exit code with which a command says that it stopped
// because its lease is gone (EX_TEMPFAIL of sysexits.h): it learnt that the
// node was taken over, its run cancelled, or its lease ran out on Redis's
// clock, or a write it made under the lease was refused. The exec kind
// records such an exit as the lost attempt it is, the way it records a
// lease its worker lost: the attempt is abandoned, nothing is committed,
// and it is not counted as a failure of the node. Every baton integration
// (the LangGraph.js saver, the Python one) exits with this code.
const ExitLeaseLost = 75

// Variables of the lease watch: with them, a command in any language can
// learn that its worker stopped renewing its lease without writing
// anything, by reading the node (see docs/langgraph-js.md, "Watching the
// lease from any language"). Set only when the command gets the store
// (ExecOptions.RedisURL).
const (
	envNodeKey = "BATON_NODE_KEY"
	envRunKey  = "BATON_RUN_KEY"
)

// watchEnv is what a command needs to watch its lease besides its claim id
// and epoch (BATON_CLAIM_ID, BATON_EPOCH): the Redis keys of its node's
// hash and of its run's hash. A command that stops when the lease is gone exits
// ExitLeaseLost.
func watchEnv(t *runner.Task, prefix string) []string {
	l := t.Lease
	k := fence.Keys{Prefix: prefix}
	return []string{
		envNodeKey + "=" + k.Node(l.Thread, l.Run, l.Node),
		envRunKey + "=" + k.Run(l.Thread, l.Run),
	}
}

// Bounds on how long an attempt whose command exited ExitLeaseLost waits
// for its worker to agree that the lease is gone.
const (
	lostWaitMin = time.Second
	lostWaitMax = 5 * time.Minute
)

// lostWait is how long to wait for the worker's verdict on a lease whose
// command reported it lost: about one lease, measured at the attempt's
// start from the lease's deadline. The worker's heartbeater settles it
// within that: a renewal is refused at the next tick when the node was
// taken over or the run cancelled, and a worker that could not renew
// stops trusting its lease before the lease's deadline (self-fencing).
func lostWait(l fence.Lease) time.Duration {
	return min(max(time.Until(l.Until), lostWaitMin), lostWaitMax)
}

// leaseLostExit is the outcome of a command that exited ExitLeaseLost
// while the attempt's context was live. It waits, at most wait, for the
// worker to end the attempt (ctx cancelled with runner.ErrLeaseLost,
// runner.ErrRunCancelled, runner.ErrShutdown), so the worker records the
// attempt as it records that cause: abandoned, not failed. If the worker
// still holds the lease after wait (the command was wrong, or could not
// reach Redis while its worker could), the exit is an ordinary failed
// attempt, retried while attempts remain.
func leaseLostExit(ctx context.Context, name string, wait time.Duration, xe *ExitError) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("exec %s: exit code %d, lease lost: %w", name, ExitLeaseLost, context.Cause(ctx))
	case <-timer.C:
		return fmt.Errorf("exec %s: %w (the command reported a lost lease, yet the worker still held it after %s)",
			name, xe, wait.Round(time.Millisecond))
	}
}
