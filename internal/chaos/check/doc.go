// Package check judges what a fault run of baton left behind: the protocol
// histories the runners wrote (HISTORY_FILE), the downstream's admit log
// (ADMIT_LOG), the faults the harness injected, and the final state of every
// run read back from Redis.
//
// It exists apart from the harness (cmd/chaos) so that it can be tested on
// small hand-written histories: a checker that has never been seen to fail
// proves nothing.
//
// Two kinds of check run:
//
//   - Linearizability (porcupine). Each node is a register (state, epoch,
//     claim id); every script call a runner made is an operation on it, with
//     the interval the caller saw. The model is permissive where only time
//     decides (a claim of a RUNNING node may be a takeover: the checker
//     cannot know Redis's clock) and strict where fencing decides: a claim
//     grants exactly epoch+1, a commit, heartbeat, fail or release is
//     accepted only with the current epoch and claim id while RUNNING,
//     nothing is accepted after a terminal state, and a retry of an applied
//     commit may only answer "replay" (a replay may also be the first
//     effect of the same call: go-redis resends a command whose connection
//     broke). A call whose reply never arrived ("unknown") may or may not
//     have taken effect, so the model steps both ways
//     (porcupine.NondeterministicModel); so may the continuation of a
//     commit that got no reply. A runner killed with SIGKILL loses the
//     history lines of whatever it had in flight; the checker adds such a
//     "phantom" operation only to nodes that are not linearizable without
//     one, and only for incarnations killed before the node's last line
//     and at most 10s before its first.
//   - Direct checks on the outcome: every accepted run is found and
//     terminal; every SUCCEEDED node has exactly one committed event, at its
//     final epoch, and no other accepted commit in the histories; the
//     downstream never admitted a token older than one it had already
//     admitted for the resource; every takeover came within LEASE_TTL +
//     GRACE + SWEEP_INTERVAL + slack of the previous owner's last renewal,
//     outside windows where Redis or the claimer's link was down or, after
//     the node's hand-out, every worker of its queue was full or faulted
//     (Input.Workers); and no node FAILED with "no attempts left" when an
//     attempt it lost is not explained by a fault of its owner's process
//     (or a partition longer than the lease), i.e. when retries of lost
//     replies or short stalls burnt it.
//   - Thread checks (threads.go, threadcheck.go, threadresume.go), on what
//     the conversation workload recorded (ThreadInput) and the runs'
//     events on Redis's clock: at most one active run per thread at any
//     time (started/run_finished); every queued run started or was
//     withdrawn, and a withdrawn one never started; an interrupt or
//     rollback queued behind a RUNNING run cancelled it; checkpoint
//     versions strictly increasing per thread and namespace, never reused
//     (checkpointed events, and the versions read back); every accepted
//     checkpoint saved while its run was the thread's active run, by the
//     current claim of its node (the epoch claimed and not yet ended or
//     taken over; the claim id, from the data's fencing token, one the
//     histories granted that epoch); every attempt started from the
//     thread's newest checkpoint, the rolled-back runs' removed, which is
//     the interrupted run's last one after an interrupt and the newest
//     from before the rolled-back run after a rollback (each checkpoint's
//     data, a Step, says what its attempt resumed from); and at the end
//     no rolled-back run's checkpoint is left, the newest is the one that
//     rule says, and none is missing that the history cap cannot explain.
//     Rollback targets and removal times follow the contract
//     (threads-spec): a rollback run queued behind a RUNNING run A
//     targets it, and A's checkpoints go at the first start after A
//     ended unless every rollback targeting A was cancelled before.
//     Orders within one ms of Redis's clock are not judged (Undecided).
package check
