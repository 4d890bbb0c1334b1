package fence

import (
	"errors"
	"fmt"

	"github.com/batonrun/baton/fence/ids"
)

// Sentinel errors. Scripts return integer codes; codeErrors maps each code to
// one of these in one place, and a test checks that every code a script's
// header documents is mapped. Check them with errors.Is.
var (
	// ErrInvalidID: an ID is empty, too long or holds a character outside
	// [A-Za-z0-9._-]. It is ids.ErrInvalid, which ValidateID wraps.
	ErrInvalidID = ids.ErrInvalid
	// ErrInvalidData: a checkpoint's data or metadata is not JSON.
	ErrInvalidData = errors.New("fence: invalid data")
	// ErrNotFound: the run or node does not exist.
	ErrNotFound = errors.New("fence: not found")
	// ErrNodeBusy: another worker holds a live lease on the node.
	ErrNodeBusy = errors.New("fence: node busy")
	// ErrNodeDone: the node is terminal; nothing may change it again.
	ErrNodeDone = errors.New("fence: node done")
	// ErrNotDue: the node is READY but its retry backoff has not passed.
	ErrNotDue = errors.New("fence: node not due")
	// ErrNodeBlocked: the node still waits for its dependencies.
	ErrNodeBlocked = errors.New("fence: node blocked")
	// ErrAttemptsExhausted: the owner's lease expired and no attempt is left;
	// the node must be failed (Store.Expire), not claimed again.
	ErrAttemptsExhausted = errors.New("fence: attempts exhausted")
	// ErrRunCancelled: the expired owner's run was cancelled; the node must
	// be ended (Store.Expire), not claimed again.
	ErrRunCancelled = errors.New("fence: run cancelled")
	// ErrKindNotServed: the claiming worker does not run the node's kind
	// (see KindError); nothing changed and no attempt was counted.
	ErrKindNotServed = errors.New("fence: kind not served")
	// ErrStaleEpoch: the write carries an epoch older than the node's; another
	// worker claimed the node since.
	ErrStaleEpoch = errors.New("fence: stale epoch")
	// ErrNotOwner: the epoch matches but the claim id does not (the same epoch
	// was handed out twice, e.g. after a failover lost a claim).
	ErrNotOwner = errors.New("fence: not owner")
	// ErrNotRunning: the caller still owns the node's last claim, but the node
	// left RUNNING (released, or finished by an earlier write of the caller).
	ErrNotRunning = errors.New("fence: node not running")
	// ErrLeaseActive: the lease has not expired (plus grace) yet.
	ErrLeaseActive = errors.New("fence: lease still active")
	// ErrRunConflict: a run with this id exists with a different spec.
	ErrRunConflict = errors.New("fence: run exists with a different spec")
	// ErrThreadBusy: the thread's active run has not finished and the new
	// run's multitask strategy is "reject".
	ErrThreadBusy = errors.New("fence: thread busy")
	// errActiveChanged: the thread's active run changed between the read
	// and the submit; Submit retries.
	errActiveChanged = errors.New("fence: thread's active run changed")
	// ErrRunDone: the run has finished; it cannot be cancelled.
	ErrRunDone = errors.New("fence: run done")
	// ErrNotActiveRun: the caller's run is not its thread's active run
	// (it was interrupted, rolled back, or has not started): its
	// checkpoints would overwrite another run's state.
	ErrNotActiveRun = errors.New("fence: run is not the thread's active run")
	// ErrTooLarge: a checkpoint or pending write is over the size cap.
	ErrTooLarge = errors.New("fence: too large")
	// ErrNoCheckpoint: no checkpoint with that id in the namespace.
	ErrNoCheckpoint = errors.New("fence: no such checkpoint")
	// ErrNotRetryable: the run cannot be retried: it SUCCEEDED, or it is
	// QUEUED behind its thread's active run.
	ErrNotRetryable = errors.New("fence: run not retryable")
	// ErrNodeWaiting: the node is parked (WAITING) until a resume answers
	// its wait; no worker can claim it before.
	ErrNodeWaiting = errors.New("fence: node waiting")
	// ErrNotWaiting: a resume names a node that is not waiting, or a wait
	// the node is not waiting on.
	ErrNotWaiting = errors.New("fence: node not waiting")
	// ErrUnknownNode: the run exists and has no node of that id. It
	// matches ErrNotFound too.
	ErrUnknownNode = fmt.Errorf("%w: no such node", ErrNotFound)
	// ErrRunActive: a delete names a run that has not ended.
	ErrRunActive = errors.New("fence: run active")
)

// ErrNotReplicated: a claim or commit ran on the primary but fewer
// replicas than Options.ClaimReplicas acknowledged it in time (see
// ReplicationError). It is not a refusal: retry with the same identity,
// which replays the write and waits again.
// ErrLimitWait: no slot of a concurrency limit was free; the node stays
// READY, waits its turn, and is delivered again when a slot frees
// (*LimitWaitError says which limit).
var ErrLimitWait = errors.New("fence: waiting for a limit")

// errLimitKeys: the node has limits and the call did not pass their keys.
var errLimitKeys = errors.New("fence: the node's limit keys are needed")

var ErrNotReplicated = errors.New("fence: not acknowledged by enough replicas")

// ReplicationError says how many replicas acknowledged a write.
type ReplicationError struct {
	Acked, Want int64
}

func (e *ReplicationError) Error() string {
	return fmt.Sprintf("%v: %d of %d", ErrNotReplicated, e.Acked, e.Want)
}
func (e *ReplicationError) Unwrap() error { return ErrNotReplicated }

// codeErrors is the one place script codes become errors.
var codeErrors = map[int64]error{
	-1:  ErrNotFound,
	-2:  ErrNodeBusy,
	-3:  ErrNodeDone,
	-4:  ErrNotDue,
	-5:  ErrNodeBlocked,
	-6:  ErrAttemptsExhausted,
	-7:  ErrRunCancelled,
	-8:  ErrKindNotServed,
	-10: ErrStaleEpoch,
	-11: ErrNotOwner,
	-12: ErrNotRunning,
	-13: ErrLeaseActive,
	-20: ErrRunConflict,
	-21: ErrThreadBusy,
	-23: errActiveChanged,
	-22: ErrRunDone,
	-14: ErrNotActiveRun,
	-15: ErrTooLarge,
	-16: ErrNoCheckpoint,
	-24: ErrNotRetryable,
	-9:  ErrNodeWaiting,
	-25: ErrNotWaiting,
	-30: ErrRunActive,
	-50: ErrScheduleChanged,
	-51: ErrScheduleMoved,
	-31: errLimitKeys,
	-32: ErrLimitWait,
	-17: ErrStreamSeq,
}

func codeError(code int64) error {
	if err, ok := codeErrors[code]; ok {
		return err
	}
	return fmt.Errorf("fence: unknown script code %d", code)
}

// IsFenced reports whether err means the caller no longer owns the node: a
// stale epoch, another claim id, a node that left RUNNING, or (for a
// checkpoint) a run that is no longer its thread's active run. The caller
// must stop and must not retry the write.
func IsFenced(err error) bool {
	return errors.Is(err, ErrStaleEpoch) || errors.Is(err, ErrNotOwner) || errors.Is(err, ErrNotRunning) ||
		errors.Is(err, ErrNotActiveRun)
}

// IsRefused reports whether err is a script's answer (one of the sentinel
// errors above) rather than a Redis or network error. A refusal is final:
// retrying the call with the same identity gets the same answer. Any other
// error may have come after the script ran; retry with the same identity.
func IsRefused(err error) bool { return refusal(err) != nil }

// refusal returns the sentinel err wraps, or nil.
func refusal(err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range codeErrors {
		if errors.Is(err, sentinel) {
			return sentinel
		}
	}
	for _, bad := range []error{ErrInvalidID, ErrInvalidData} {
		if errors.Is(err, bad) {
			return bad
		}
	}
	return nil
}
