// Package fence is baton's ownership protocol: who may run a node, and whose
// writes count.
//
// A queue delivers at least once, and a worker that is only paused (GC, a
// partition, a blocked loop) cannot be told from a dead one. So delivery is a
// trigger, never authority: ownership lives in the node's Redis hash, and
// every operation is one Lua script (scripts/lua) that compares the caller's
// epoch and claim id with the stored ones in the same atomic step.
//
//	BLOCKED --deps done--> READY --claim--> RUNNING --commit--> SUCCEEDED
//	                        ^                 |  \--fail(final)--> FAILED
//	                        |--release/retry--|   \--cancel-------> CANCELLED
//	RUNNING (lease expired + grace) --claim--> RUNNING (new owner, epoch+1)
//	FAILED, CANCELLED --Retry (the whole run)--> READY or BLOCKED (epoch+1)
//
// Terminal states change only by Retry, which re-runs a FAILED or CANCELLED
// run from its failed and cancelled nodes, fencing each as a claim would
// (epoch+1, claim id cleared). Dependents of a FAILED or CANCELLED node are
// CANCELLED; a run ends when every node is terminal.
//
// Term-scoped operations: Heartbeat, Commit, Fail and Release take the Lease
// a Claim returned. Each is accepted only while that claim is the node's
// current one; otherwise it fails with ErrStaleEpoch, ErrNotOwner or
// ErrNotRunning (IsFenced), changes nothing, and the refusal is recorded as a
// stale_rejected event. Lease deadlines are computed from Redis's TIME, never
// a worker's clock.
//
// A commit may also claim the next node for its caller (CommitContinue): the
// same claim as Claim makes, in the same atomic step, so a chain of nodes
// runs without a queue round trip per step and stays fenced.
//
// A reply can be lost after its script ran. Every operation is therefore
// safe to retry with the same identity (ClaimAs's claim id, a Continue's
// claim id, the lease, a checkpoint's id): each script recognises its own
// earlier success and answers as the first time, so no claim is made twice
// or orphaned and no attempt is burnt. IsRefused tells a script's answer,
// which a retry cannot change, from a Redis or network error, after which
// the caller retries.
//
// Checkpoints (SaveCheckpoint, PutWrites) belong to a thread and outlive
// its runs; they are fenced like a commit, and accepted only from a run
// that is its thread's active run. Submit and Promote keep at most one run
// of a thread active, by its multitask strategy.
//
// fence knows Redis and the scripts, never the queue: package runner adapts
// it to Asynq.
package fence
