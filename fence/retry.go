package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Retried says what Retry did.
type Retried struct {
	Thread string // the run's thread (the run's own id when it has none)
	// Status is the run's status after the call: RUNNING.
	Status string
	// Ready are the re-run nodes now READY, to enqueue; Queues[i] is
	// Ready[i]'s queue and Attempts[i] its attempt so far (its next task is
	// Attempts[i] + 1). A replay lists the nodes still READY.
	Ready    []string
	Queues   []string
	Attempts []int64
	// Replay: this retry id retried the run before (its reply was lost);
	// nothing changed.
	Replay bool
	// AlreadyRunning: the run was RUNNING already (retried under another
	// id, or never finished); nothing changed.
	AlreadyRunning bool
}

// OpenWaitError refuses a retry of a run whose node still waits for a
// resume: the run is RUNNING, and a retry would answer no question. It
// matches ErrNotRetryable.
type OpenWaitError struct {
	Run, Node, WaitID string
}

func (e *OpenWaitError) Error() string {
	return fmt.Sprintf("retry %s: node %s waits for a resume (wait_id %s): %v", e.Run, e.Node, e.WaitID, ErrNotRetryable)
}
func (e *OpenWaitError) Unwrap() error { return ErrNotRetryable }

// Retry re-runs a FAILED or CANCELLED run from its failed and cancelled
// nodes, keeping the SUCCEEDED ones and their results (retry.lua). Each
// re-run node is fenced as by a claim: its epoch grows and its claim id is
// cleared, so a late write from an earlier attempt is refused; its
// attempts used start again from zero; the answers its waits got are
// not read again (a node that parks asks again). retryID (NewClaimID)
// names the request: the same id again is a Replay. A run RUNNING
// already is AlreadyRunning, or an *OpenWaitError while a node of it
// waits for a resume; one that SUCCEEDED or is QUEUED is ErrNotRetryable; a
// thread's run that is no longer the thread's active run is
// ErrNotActiveRun.
func (s *Store) Retry(ctx context.Context, run, retryID, who string) (Retried, error) {
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return Retried{}, fmt.Errorf("retry %s: %w", run, err)
	}
	ids, err := s.nodeIDs(ctx, thread, run)
	if errors.Is(err, ErrNotFound) {
		// Packed into one key by the retention: retry.lua writes a FAILED
		// run back as its keys before re-running it, and answers a
		// SUCCEEDED one as it would its keys. It needs the node keys.
		p, perr := s.packedOf(ctx, thread, run)
		switch {
		case perr != nil:
			err = perr
		case p != nil:
			ids, err = nil, nil
			if jerr := json.Unmarshal([]byte(p.Run["nodes"]), &ids); jerr != nil {
				err = fmt.Errorf("run %s: packed node list: %w", run, jerr)
			}
		}
	}
	if err != nil {
		return Retried{}, fmt.Errorf("retry %s: %w", run, err)
	}
	// The locator lives outside the thread's slot; the script persists the
	// rest. Retention may have set its expiry; a retried run must stay
	// findable.
	if err := s.rdb.Persist(ctx, s.keys.Locator(run)).Err(); err != nil {
		return Retried{}, fmt.Errorf("retry %s: %w", run, err)
	}
	threaded := ""
	if thread != run {
		threaded = "1"
	}
	keys := []string{s.keys.Run(thread, run), s.keys.Events(thread, run), s.keys.Ready(ShardOf(thread)),
		s.keys.Finished(ShardOf(thread)), s.keys.Active(thread), s.keys.Packed(thread, run)}
	args := []any{run, retryID, Ref(thread, run, ""), s.maxlen, threaded, who}
	for _, id := range ids {
		keys = append(keys, s.keys.Node(thread, run, id))
		args = append(args, id)
	}
	v, err := s.run(ctx, "retry", keys, args...)
	if err != nil {
		return Retried{}, fmt.Errorf("retry %s: %w", run, err)
	}
	code, r, err := reply(v)
	switch {
	case errors.Is(err, ErrNotRetryable) || errors.Is(err, ErrNotActiveRun):
		// Refused: the run is as it was, and so is its locator's expiry,
		// the time to live its run hash still has (none: the locator had
		// none either). Also after a persist whose retry's first reply
		// was lost. Best effort: a locator left without one outlives its
		// run, and finds nothing. A packed run's time to live is its
		// packed key's.
		for _, k := range []string{s.keys.Run(thread, run), s.keys.Packed(thread, run)} {
			if pttl, perr := s.rdb.PTTL(ctx, k).Result(); perr == nil && pttl > 0 {
				_ = s.rdb.PExpire(ctx, s.keys.Locator(run), pttl).Err()
				break
			}
		}
	case err == nil && thread != run:
		// Again, now that the run is live: a retention sweep that read
		// the run as ended before the script may have given the locator
		// its time to live since (expireLocators).
		if err := s.rdb.Persist(ctx, s.keys.Locator(run)).Err(); err != nil {
			return Retried{}, fmt.Errorf("retry %s: %w", run, err)
		}
	}
	switch {
	case errors.Is(err, ErrNotRetryable) && len(r) > 2:
		return Retried{}, &OpenWaitError{Run: run, Node: asString(r[1]), WaitID: asString(r[2])}
	case errors.Is(err, ErrNotRetryable):
		return Retried{}, fmt.Errorf("retry %s: status %s: %w", run, asString(r[0]), err)
	case errors.Is(err, ErrNotActiveRun):
		return Retried{}, fmt.Errorf("retry %s: thread %s has moved on to run %q: %w", run, thread, asString(r[0]), err)
	case err != nil:
		return Retried{}, fmt.Errorf("retry %s: %w", run, err)
	}
	out := Retried{Thread: thread, Status: "RUNNING", Replay: code == 2, AlreadyRunning: code == 3}
	if code != 1 {
		out.Status, r = asString(r[0]), r[1:]
	}
	for i := 0; i+2 < len(r); i += 3 {
		out.Ready = append(out.Ready, asString(r[i]))
		out.Queues = append(out.Queues, asString(r[i+1]))
		out.Attempts = append(out.Attempts, asInt(r[i+2]))
	}
	return out, nil
}
