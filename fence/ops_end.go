package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Committed says what a commit did.
type Committed struct {
	RunStatus string   // the run's status after the commit
	Ready     []string // dependents now READY: enqueue them
	Queues    []string // Queues[i] is Ready[i]'s queue
	// Replay: this claim had committed before (a retry after a lost reply);
	// nothing changed, and Ready, Queues and Next say what the first commit
	// left: dependents still READY, the continuation still held.
	Replay bool
	// Next is the dependent claimed for the caller by the commit itself
	// (Continue), or the node it took from the queue (Taken), or nil.
	Next *Claimed
	// Taken: Next is a node taken from the queue (Continue.Take), of
	// another run or of this one (a wide run's next root), not a
	// dependent.
	Taken bool
	// ThreadQueued: the run, of a thread, has ended and a run waits in the
	// thread's queue, read in the same atomic step: Promote has one to
	// start. False for a run without a thread, or with nothing queued.
	ThreadQueued bool
}

// Continue asks a commit to claim, in the same atomic step, the first
// dependent it makes READY whose queue and kind the caller serves: the caller
// runs it next without a queue round trip. Zero value: no continuation.
type Continue struct {
	// ClaimID is the continuation's claim id (NewClaimID), one per commit
	// and the same on every retry of it, so a retried commit hands back the
	// continuation its first try claimed. Empty: no continuation.
	ClaimID string
	TTL     time.Duration // the continuation's lease
	Queues  []string      // queues the caller serves
	Kinds   []string      // kinds the caller runs
	// Take names the Asynq queue the commit may take the caller's next
	// node from when it continues with no dependent: the oldest due READY
	// node of the committed node's shard in that queue, whose delivery
	// still waits near the queue's head, is claimed in the same step and
	// its task removed (counted as processed, as Asynq's done would). A
	// drain of one-node runs then costs one script call a node, as a
	// chain does. Only on a single server (the queue's keys are in another
	// slot of a cluster), and only nodes with no limits; ignored on a
	// cluster. Empty: take none.
	Take string
}

// Commit records result (JSON text) and moves the node to SUCCEEDED, if and
// only if l is still the node's current claim. dependents are the node's
// direct dependents (Claimed.Dependents).
func (s *Store) Commit(ctx context.Context, l Lease, result []byte, dependents []string) (Committed, error) {
	return s.CommitContinue(ctx, l, result, dependents, Continue{})
}

// CommitContinue is Commit with a continuation (see Continue). Retried
// after a lost reply with the same lease and cont.ClaimID, it returns what
// the first try did (Replay).
func (s *Store) CommitContinue(ctx context.Context, l Lease, result []byte, dependents []string, cont Continue) (out Committed, err error) {
	return s.commit(ctx, nil, l, result, dependents, cont, Spend{})
}

// CommitVia is CommitContinue with the script sent through via (EVALSHA,
// then EVAL on NOSCRIPT) instead of the store's client, so that the
// caller can send it in a round trip of its own: the runner sends a node's
// last commit with Asynq's acknowledgement of its task. A nil via, or a
// store whose writes must reach replicas (Options.ClaimReplicas), sends it
// as CommitContinue does: the commit and its WAIT share a connection of
// their own.
//
// sp is the cost the attempt reported (Spend): the commit charges its
// difference from the claim's cost to the node's metered limits. The zero
// Spend reports none.
func (s *Store) CommitVia(ctx context.Context, via redis.Scripter, l Lease, result []byte, dependents []string, cont Continue, sp Spend) (Committed, error) {
	if s.replicas > 0 {
		via = nil
	}
	return s.commit(ctx, via, l, result, dependents, cont, sp)
}

func (s *Store) commit(ctx context.Context, via redis.Scripter, l Lease, result []byte, dependents []string, cont Continue, sp Spend) (out Committed, err error) {
	defer s.observe("commit", l, time.Now(), &err, func(o *Op) {
		o.Replay = out.Replay
		if out.Next != nil {
			o.Next = &OpNext{Node: out.Next.Node, Epoch: out.Next.Epoch, Claim: out.Next.ClaimID}
			if out.Taken {
				o.Next.Thread, o.Next.Run = out.Next.Thread, out.Next.Run
			}
		}
	})
	claimID := ""
	if cont.ClaimID != "" && cont.TTL > 0 && len(cont.Queues) > 0 && len(cont.Kinds) > 0 {
		claimID = cont.ClaimID
	}
	// The commit that ends a one-node run leaves it to the retention
	// sweep (ARGV[12] 0), as every other run: retain.lua packs a run that
	// SUCCEEDED into one key, which holds a quarter of the memory that
	// commit.lua's own retention leaves (docs/performance.md).
	retainMS := int64(0)
	keys := s.endKeys(l)
	take, day, expireAt := "", "", int64(0)
	if claimID != "" && cont.Take != "" && !s.onCluster() {
		// Asynq's key names and its processed count's day and time to
		// live (its internal/base and rdb, v0.26).
		now := time.Now().UTC()
		take, day, expireAt = "asynq:{"+cont.Take+"}:", now.Format("2006-01-02"), now.Add(90*24*time.Hour).Unix()
	}
	args := []any{l.Node, l.Owner, l.Epoch, l.ClaimID, string(result), Ref(l.Thread, l.Run, ""), s.maxlen,
		claimID, ms(cont.TTL), "," + strings.Join(cont.Queues, ",") + ",", "," + strings.Join(cont.Kinds, ",") + ",", retainMS,
		sp.arg(), take, s.keys.index(ShardOf(l.Thread), ""), day, expireAt}
	for _, d := range dependents {
		keys = append(keys, s.keys.Node(l.Thread, l.Run, d))
		args = append(args, d)
	}
	switch {
	case l.Thread != l.Run:
		keys = append(keys, s.keys.Queue(l.Thread))
	case retainMS > 0, l.Limits != "":
		// With limit keys after it, the locator is always passed: the
		// script reads it only when retaining (ARGV[12] above 0).
		keys = append(keys, s.keys.Locator(l.Run))
	}
	keys = append(keys, s.endLimitKeys(l.Limits, sp)...)
	var v any
	if via != nil {
		v, err = s.scripts["commit"].Run(ctx, via, keys, args...).Result()
	} else {
		v, err = s.runReplicated(ctx, "commit", keys, args...)
	}
	if err != nil {
		return Committed{}, fmt.Errorf("commit %s: %w", l, err)
	}
	v = s.takeWakes(ctx, v)
	code, r, err := reply(v)
	if err != nil {
		replay, err := s.packedFence(ctx, l, "commit", fmt.Errorf("commit %s: %w", l, err))
		if replay { // this claim's commit; its run has ended and was packed since
			s.freeClustered(ctx, l, sp, true)
			out = Committed{RunStatus: "SUCCEEDED", Replay: true}
			if take != "" {
				out.Next = s.takenAgain(ctx, l, claimID, cont)
				out.Taken = out.Next != nil
			}
			return out, nil
		}
		return Committed{}, err
	}
	s.freeClustered(ctx, l, sp, code == 2)
	if len(r) < 3 {
		return Committed{}, fmt.Errorf("commit %s: unexpected reply %v", l, v)
	}
	out = Committed{RunStatus: asString(r[0]), Replay: code == 2, ThreadQueued: asInt(r[1]) == 1}
	rest := r[2:]
	switch asInt(rest[0]) {
	case 3: // a node taken from the queue, of this run or another
		if len(rest) < 16 {
			return Committed{}, fmt.Errorf("commit %s: unexpected reply %v", l, v)
		}
		n := rest[1:16]
		rest = rest[16:]
		ref := NodeRef{Thread: asString(n[13]), Run: asString(n[14]), Node: asString(n[0])}
		next, err := claimed(ref, l.Owner, claimID, n[1:11], asString(n[11]), asString(n[12]))
		if err == nil {
			err = s.readDeps(ctx, next, nil)
		}
		if err != nil {
			return out, fmt.Errorf("commit %s: taken %s: %w", l, ref, err)
		}
		out.Next, out.Taken = next, true
	case 1:
		if len(rest) < 14 {
			return Committed{}, fmt.Errorf("commit %s: unexpected reply %v", l, v)
		}
		n := rest[1:14]
		rest = rest[14:]
		next, err := claimed(NodeRef{Thread: l.Thread, Run: l.Run, Node: asString(n[0])}, l.Owner, claimID,
			n[1:11], asString(n[11]), asString(n[12]))
		if err != nil {
			return out, fmt.Errorf("commit %s: continuation: %w", l, err)
		}
		// The committed result is this commit's own: only the
		// continuation's other deps are read (a replay reads them all, the
		// stored result being the first try's). As for a claim, a failed
		// read is retried with the same identity, and the replayed commit
		// hands the continuation back.
		var known map[string]json.RawMessage
		if !out.Replay {
			known = map[string]json.RawMessage{l.Node: json.RawMessage(result)}
		}
		if err := s.readDeps(ctx, next, known); err != nil {
			return out, fmt.Errorf("commit %s: continuation: %w", l, err)
		}
		out.Next = next
	default:
		rest = rest[1:]
	}
	for i := 0; i+1 < len(rest); i += 2 {
		out.Ready = append(out.Ready, asString(rest[i]))
		out.Queues = append(out.Queues, asString(rest[i+1]))
	}
	return out, nil
}

// takenAgain answers the replay of a commit whose run was packed since its
// first try: the node that try took from the queue (the packed node's
// field next), claimed again under the continuation's claim id, which
// claim.lua recognises as a retried claim while the taker still holds it.
// nil when the commit took none, or the node has moved on since (taken
// over, ended); then its lease ran out, and the sweeper handed it on.
func (s *Store) takenAgain(ctx context.Context, l Lease, claimID string, cont Continue) *Claimed {
	b, err := s.rdb.Get(ctx, s.keys.Packed(l.Thread, l.Run)).Bytes()
	if err != nil {
		return nil
	}
	p, err := unpackRun(b)
	if err != nil {
		return nil
	}
	var ids []string
	_ = json.Unmarshal([]byte(p.Run["nodes"]), &ids)
	for i, id := range ids {
		if id != l.Node || i >= len(p.Nodes) {
			continue
		}
		thread, run, node, ok := ParseRef(p.Nodes[i]["next"])
		if !ok {
			return nil
		}
		c, err := s.ClaimKinds(ctx, NodeRef{Thread: thread, Run: run, Node: node}, l.Owner, claimID, cont.Kinds, cont.TTL, cont.TTL)
		if err != nil {
			return nil
		}
		return c
	}
	return nil
}

// endKeys are the fixed keys of the scripts that can end a node (commit,
// fail, release): its hash, the run's hash and events, and the indexes.
func (s *Store) endKeys(l Lease) []string {
	sh := ShardOf(l.Thread)
	return []string{s.keys.Node(l.Thread, l.Run, l.Node), s.keys.Run(l.Thread, l.Run),
		s.keys.Events(l.Thread, l.Run), s.keys.Leases(sh), s.keys.Ready(sh), s.keys.Finished(sh)}
}

// Outcome is what became of a failed, released or expired node.
type Outcome int

const (
	// Retrying: the node is READY again at Ended.ReadyAt.
	Retrying Outcome = 1
	// Failed: the node FAILED for good; its dependents were cancelled.
	Failed Outcome = 2
	// Cancelled: the run was cancelled, so the node is CANCELLED.
	Cancelled Outcome = 3
)

// String is "retrying", "failed" or "cancelled"; "" for the zero value.
func (o Outcome) String() string {
	switch o {
	case Retrying:
		return "retrying"
	case Failed:
		return "failed"
	case Cancelled:
		return "cancelled"
	}
	return ""
}

// Ended is the result of Fail, Expire and Release.
type Ended struct {
	Outcome   Outcome
	ReadyAt   time.Time // Retrying only
	RunStatus string    // Failed and Cancelled only
}

// Failure describes a failed attempt.
type Failure struct {
	Err   string        // recorded as the node's error
	Delay time.Duration // backoff before the retry
	Final bool          // permanent: no retry whatever attempts remain
	// Spend is the cost the attempt reported before it failed (a call
	// that failed after it spent tokens): charged as a commit charges it.
	Spend Spend
}

// Fail records a failed attempt if l is still the node's current claim: a
// retry after f.Delay while attempts remain, otherwise FAILED with its
// descendants (Claimed.Descendants) cancelled.
func (s *Store) Fail(ctx context.Context, l Lease, f Failure, descendants []string) (Ended, error) {
	mode := "retry"
	if f.Final {
		mode = "final"
	}
	return s.fail(ctx, "fail", l, f.Err, ms(f.Delay), mode, 0, descendants, f.Spend)
}

// Expire ends a node whose owner's lease expired when its claim was refused
// with an *ExpiredError: FAILED (attempts exhausted) or CANCELLED (run
// cancelled). The script checks again that the lease expired (plus grace)
// and still belongs to e.Lease, so a late heartbeat wins.
func (s *Store) Expire(ctx context.Context, e *ExpiredError, worker string, grace time.Duration) (Ended, error) {
	l := e.Lease
	l.Owner = worker // recorded as the event's worker
	return s.fail(ctx, "expire", l, "no attempts left", 0, "expire", ms(grace), e.Descendants, Spend{})
}

func (s *Store) fail(ctx context.Context, op string, l Lease, msg string, delayMS int64, mode string, graceMS int64,
	descendants []string, sp Spend) (end Ended, err error) {
	defer s.observe(op, l, time.Now(), &err, func(o *Op) { o.End = end.Outcome.String() })
	keys := s.endKeys(l)
	args := []any{l.Node, l.Owner, l.Epoch, l.ClaimID, msg, delayMS, mode, graceMS, Ref(l.Thread, l.Run, ""), s.maxlen, sp.arg()}
	for _, d := range descendants {
		keys = append(keys, s.keys.Node(l.Thread, l.Run, d))
		args = append(args, d)
	}
	keys = append(keys, s.endLimitKeys(l.Limits, sp)...)
	v, err := s.run(ctx, "fail", keys, args...)
	if err != nil {
		return Ended{}, fmt.Errorf("%s %s: %w", op, l, err)
	}
	v = s.takeWakes(ctx, v)
	code, r, err := reply(v)
	packed := err != nil
	if packed {
		answer, perr := s.packedAnswer(ctx, l, "fail", fmt.Errorf("%s %s: %w", op, l, err))
		if perr != nil {
			return Ended{}, perr
		}
		code, r, _ = reply(answer) // the run was packed since this claim failed the node
	}
	s.freeClustered(ctx, l, sp, packed) // a packed run's answer is a replay's
	if code == 1 {
		return Ended{Outcome: Retrying, ReadyAt: time.UnixMilli(asInt(r[0]))}, nil
	}
	return Ended{Outcome: Outcome(code), RunStatus: asString(r[0])}, nil
}

// Release gives the node back without counting a failed attempt (graceful
// shutdown): READY at once, or CANCELLED when its run was cancelled.
// Retried after a lost reply, it returns what the first try did.
func (s *Store) Release(ctx context.Context, l Lease, reason string) (end Ended, err error) {
	defer s.observe("release", l, time.Now(), &err, func(o *Op) { o.End = end.Outcome.String() })
	keys := append(s.endKeys(l), s.endLimitKeys(l.Limits, Spend{})...)
	v, err := s.run(ctx, "release", keys, l.Node, l.Owner, l.Epoch, l.ClaimID, reason, l.Ref(), s.maxlen)
	if err != nil {
		return Ended{}, fmt.Errorf("release %s: %w", l, err)
	}
	v = s.takeWakes(ctx, v)
	code, r, err := reply(v)
	if err != nil {
		answer, perr := s.packedAnswer(ctx, l, "release", fmt.Errorf("release %s: %w", l, err))
		if perr != nil {
			return Ended{}, perr
		}
		code, r, _ = reply(answer) // the run was packed since this claim released the node
	}
	s.freeClustered(ctx, l, Spend{}, false)
	if code == 1 {
		return Ended{Outcome: Retrying}, nil
	}
	return Ended{Outcome: Cancelled, RunStatus: asString(r[0])}, nil
}

// CancelResult says what Cancel did.
type CancelResult struct {
	RunStatus string
	Running   int  // nodes still RUNNING; their owners were told at once (CancelChannel)
	Already   bool // the run had been cancelled before
}

// Cancel cancels a run: BLOCKED and READY nodes at once. For RUNNING ones
// the script publishes the run on Keys.CancelChannel in the same atomic
// step, so their owners stop them at once; a worker that misses the push
// learns it from its next heartbeat. Cancelling a cancelled run pushes
// again while nodes still run. A finished run is ErrRunDone.
func (s *Store) Cancel(ctx context.Context, run, reason, who string) (CancelResult, error) {
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel %s: %w", run, err)
	}
	ids, err := s.nodeIDs(ctx, thread, run)
	if errors.Is(err, ErrNotFound) {
		if p, perr := s.packedOf(ctx, thread, run); perr == nil && p != nil {
			err = ErrRunDone // packed: it ended, as cancel.lua answers a finished run
		}
	}
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel %s: %w", run, err)
	}
	keys := []string{s.keys.Run(thread, run), s.keys.Events(thread, run), s.keys.Ready(ShardOf(thread)),
		s.keys.Finished(ShardOf(thread)), s.keys.Queue(thread)}
	args := []any{reason, who, Ref(thread, run, ""), s.maxlen, s.keys.CancelChannel()}
	for _, id := range ids {
		keys = append(keys, s.keys.Node(thread, run, id))
		args = append(args, id)
	}
	if s.onCluster() {
		// Limit keys live in other slots: the run hash once more says so
		// (cancel.lua), and a slot handed to a cancelled waiter is given
		// back at its next claim.
		keys = append(keys, s.keys.Run(thread, run))
	}
	var (
		code int64
		r    []any
	)
	for try := 0; ; try++ {
		v, err := s.run(ctx, "cancel", keys, args...)
		if err != nil {
			return CancelResult{}, fmt.Errorf("cancel %s: %w", run, err)
		}
		v = s.takeWakes(ctx, v)
		code, r, err = reply(v)
		if errors.Is(err, errLimitKeys) && try < 3 {
			// READY nodes name limits: cancel them with their keys, so a
			// slot handed to one goes to the next waiter at once (one
			// more round trip, only for such runs).
			keys = append(keys, s.cancelLimitKeys(asString(r[0]))...)
			continue
		}
		if err != nil {
			return CancelResult{}, fmt.Errorf("cancel %s: %w", run, err)
		}
		break
	}
	return CancelResult{RunStatus: asString(r[0]), Running: int(asInt(r[1])), Already: code == 2}, nil
}

// SweepOptions tunes Sweep.
type SweepOptions struct {
	Grace     time.Duration // a lease is due when lease_until + Grace has passed
	Threshold time.Duration // a READY node is due when it stayed unclaimed this long
	Limit     int           // at most this many of each kind per call
	Retry     time.Duration // an expired lease is not returned again for this long; a READY node, for max(Retry, Threshold)
	// Sweeper names the caller, so that its hand-out of expired leases is
	// remembered for Retry; empty: it is not.
	Sweeper string
	// Again asks for that last hand-out once more, less what was handed
	// out, claimed or ended since: the caller heard no reply to its last
	// Sweep or could not enqueue what it returned. Without it those nodes
	// wait Retry for another sweeper.
	Again bool
}

// Swept lists the nodes a sweeper should re-enqueue.
type Swept struct {
	Now     time.Time // Redis time
	Expired []NodeRef // RUNNING with an expired lease: a takeover is due
	Ready   []NodeRef // READY but unclaimed past the threshold
	// Partial is why some shards were not swept (their Redis node failed);
	// nil when every shard was.
	Partial error
}

// Sweep returns due index entries and pushes them back by o.Retry, so
// concurrent sweepers share the work. The entries are triggers: the caller
// enqueues, the claim script decides.
func (s *Store) Sweep(ctx context.Context, o SweepOptions) (Swept, error) {
	again := 0
	switch {
	case o.Sweeper == "":
		again = -1
	case o.Again:
		again = 1
	}
	cmds := s.runEach(ctx, "sweep", Shards, func(i int) ([]string, []any) {
		return []string{s.keys.Leases(i), s.keys.Ready(i), s.keys.SweptBy(i, o.Sweeper)},
			[]any{ms(o.Grace), ms(o.Threshold), o.Limit, ms(o.Retry), again}
	})
	var out Swept
	var errs []error
	for i, c := range cmds {
		v, err := c.Result()
		r, ok := v.([]any)
		if err == nil && (!ok || len(r) != 3) {
			err = fmt.Errorf("unexpected reply %v", v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
			continue
		}
		if now := time.UnixMilli(asInt(r[0])); now.After(out.Now) {
			out.Now = now
		}
		out.Expired = append(out.Expired, parseRefs(r[1])...)
		out.Ready = append(out.Ready, parseRefs(r[2])...)
	}
	if len(errs) == Shards {
		return Swept{}, fmt.Errorf("sweep: %w", errors.Join(errs...))
	}
	// A shard whose master is down is swept again next tick; the others'
	// due nodes are handed out now.
	if len(errs) > 0 {
		out.Partial = errors.Join(errs...)
	}
	return out, nil
}

func parseRefs(v any) []NodeRef {
	list, _ := v.([]any)
	out := make([]NodeRef, 0, len(list))
	for _, x := range list {
		if t, r, n, ok := ParseRef(asString(x)); ok {
			out = append(out, NodeRef{Thread: t, Run: r, Node: n})
		}
	}
	return out
}
