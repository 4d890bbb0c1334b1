package fence

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// NodeSpec is one node as submit.lua stores it. The caller (runner.Client)
// has validated the DAG and computed Dependents and Descendants.
type NodeSpec struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Queue       string   `json:"queue"`
	Input       string   `json:"input"` // JSON text, stored verbatim
	Deps        []string `json:"deps"`
	Dependents  []string `json:"dependents"`
	Descendants []string `json:"descendants"`
	MaxAttempts int      `json:"max_attempts"`
	TimeoutMS   int64    `json:"timeout_ms"`
	// Retry is the node's retry policy as JSON text, stored verbatim for
	// the worker (Store.RetryPolicy); empty: the worker's default.
	Retry string `json:"retry,omitempty"`
	// Limits are the node's limit keys and costs, "key=cost,...", stored
	// for its claims (claim.lua); "": none.
	Limits string `json:"limits,omitempty"`
}

// SubmitArgs is a validated run.
type SubmitArgs struct {
	Run    string
	Thread string // empty: the run is its own thread
	// Multitask is what happens when Thread is busy: "reject"
	// (ErrThreadBusy), "enqueue" (QUEUED at the back of the thread's
	// queue), "interrupt" or "rollback" (QUEUED at its front, and the
	// active run cancelled in the same script; a rollback's target's
	// writes are removed when it ended, by Promote). Empty: "reject" when
	// Thread is set; a run without a thread takes none (ErrInvalidData).
	Multitask string
	Digest    string // same run id and digest: the submit is a no-op
	Nodes     []NodeSpec
	// StartAt and StartIn delay the run's start: its root nodes are READY
	// but not due (ErrNotDue) before StartAt, or before StartIn after the
	// submit on Redis's clock; the later of the two. Zero: at once.
	StartAt time.Time
	StartIn time.Duration
	// Timeout, when positive, cancels what is left of the run once it has
	// passed since the run's start: the submit's script stores the
	// deadline, and the sweep's TimeOutRuns cancels the run past it.
	// TimeoutLabel is how the spec wrote it ("10m"), for the reason.
	Timeout      time.Duration
	TimeoutLabel string
	// Scripter, when set, is what the submit's script is sent through
	// (EVALSHA, then EVAL on NOSCRIPT) instead of the store's client, when
	// the run is to start at once as far as Submit can tell (its thread
	// had no active run when read): a caller can put the script in a round
	// trip of its own choosing, as runner.Client does with Asynq's enqueue
	// of the run's first node.
	Scripter redis.Scripter
	// Trace is the run's trace context (package tracing's Carrier), kept
	// with the run so that every attempt of its nodes, redelivered or
	// taken over, joins the submitter's trace. Empty: none.
	Trace string
}

// SubmitResult says what Submit did.
type SubmitResult struct {
	Thread  string
	Created bool     // false: the same run existed already
	Status  string   // the run's status
	Ready   []string // nodes to enqueue now (again, when not Created)
	// Incarnation names this submission of the run id (see
	// Lease.Incarnation).
	Incarnation string
	// Behind is the thread's active run when this run was QUEUED behind
	// it (multitask enqueue, interrupt, rollback).
	Behind string
	// Start is when the Ready nodes become due, Redis time: the submit's
	// own time without StartAt and StartIn.
	Start time.Time
}

// Submit creates a run and its nodes atomically. Submitting the same run id
// with the same digest again returns the existing run; another digest is
// ErrRunConflict. A run without a thread is a run of the thread of its own
// id with strategy "reject": it is refused (ErrThreadBusy) while that
// thread is busy. A strategy on a run without a thread is ErrInvalidData.
func (s *Store) Submit(ctx context.Context, a SubmitArgs) (SubmitResult, error) {
	thread := a.Thread
	if thread == "" {
		thread = a.Run
	}
	multitask := ""
	if a.Thread == "" && a.Multitask != "" {
		return SubmitResult{}, fmt.Errorf("submit %s: multitask %q: %w: a strategy needs a thread (a run without one is refused while the thread of its id is busy)",
			a.Run, a.Multitask, ErrInvalidData)
	}
	if a.Thread != "" && a.Thread != a.Run {
		multitask = cmp.Or(a.Multitask, "reject")
		switch multitask {
		case "reject", "enqueue", "interrupt", "rollback":
		default:
			return SubmitResult{}, fmt.Errorf("submit %s: multitask %q: %w: want reject, enqueue, interrupt or rollback",
				a.Run, multitask, ErrInvalidData)
		}
	}
	nodes, err := json.Marshal(a.Nodes)
	if err != nil {
		return SubmitResult{}, fmt.Errorf("submit %s: %w", a.Run, err)
	}
	inc := newIncarnation()
	own := thread == a.Run
	var active *string // nil: not read yet
	if !own {
		// A run of a thread has its run hash outside the run id's slot:
		// claim the run id first (locator.lua), so a run id can never live
		// under two threads, and read the thread's active run.
		owner, cur, err := s.claimRunID(ctx, a.Run, thread)
		if err != nil {
			return SubmitResult{}, fmt.Errorf("submit %s: %w", a.Run, err)
		}
		if owner != thread {
			return SubmitResult{}, fmt.Errorf("submit %s: thread %q, exists under %q: %w", a.Run, thread, owner, ErrRunConflict)
		}
		active = &cur
	}
	// a.Scripter carries a run that starts at once as far as can be told
	// (no active run read); once it carried a try, it carries the next
	// too, so it knows its first node's task went ahead of a refused try.
	trip := a.Scripter != nil && (active == nil || *active == "")
	for try := 0; ; try++ {
		res, cur, err := s.submit(ctx, a, thread, multitask, inc, nodes, active, trip)
		if errors.Is(err, errActiveChanged) && try < 5 {
			active = &cur // another submit to the thread won the race: read again
			continue
		}
		return res, err
	}
}

// claimRunID claims run for thread (locator.lua) and reads the thread's
// active run, in one round trip (two slots, so a pipeline, not a script).
// owner is the thread that holds run now: thread, unless another does; a
// thread whose id is a run of another thread is refused, as that other
// thread.
func (s *Store) claimRunID(ctx context.Context, run, thread string) (owner, active string, err error) {
	var get, threadLoc *redis.StringCmd
	claim, err := s.pipeScript(ctx, s.rdb, "locator", []string{s.keys.Locator(run), s.keys.Run(run, run), s.keys.Packed(run, run)},
		[]any{thread, run}, func(pipe redis.Pipeliner) {
			get = pipe.Get(ctx, s.keys.Active(thread))
			threadLoc = pipe.Get(ctx, s.keys.Locator(thread))
		})
	if err != nil {
		return "", "", err
	}
	if err := claim.Err(); err != nil {
		return "", "", err
	}
	for _, c := range []*redis.StringCmd{get, threadLoc} {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return "", "", err
		}
	}
	if other := threadLoc.Val(); other != "" && other != thread {
		return "", "", fmt.Errorf("thread %q is the id of a run of thread %q: %w", thread, other, ErrRunConflict)
	}
	return asString(claim.Val()), get.Val(), nil
}

// submit runs submit.lua once. active is the thread's active-run key as
// read (nil: not read; a run without a thread assumes none, and the script
// says when it is wrong). It returns the key as the script found it with
// errActiveChanged.
func (s *Store) submit(ctx context.Context, a SubmitArgs, thread, multitask, inc string, nodes []byte, active *string, trip bool) (SubmitResult, string, error) {
	// A run without a thread has no locator: its run hash, in the run id's
	// slot, is found by id, and the script checks that no locator there
	// names the id for a thread; the submit is one round trip.
	own := thread == a.Run
	locKey, activeRun := s.keys.Locator(a.Run), ""
	if active != nil {
		activeRun = *active
	}
	if !own {
		locKey = s.keys.Active(thread) // the script leaves KEYS[9] alone
	}
	// The active run: the key's, else the run whose id is the thread.
	activeID := cmp.Or(activeRun, thread)
	shard := ShardOf(thread)
	keys := []string{s.keys.Run(thread, a.Run), s.keys.Events(thread, a.Run), s.keys.Ready(shard),
		s.keys.Active(thread), s.keys.Run(thread, activeID), s.keys.Queue(thread), s.keys.Queued(shard), s.keys.Runs(shard), locKey,
		s.keys.Events(thread, activeID), s.keys.Finished(shard), s.keys.Packed(thread, a.Run), s.keys.Deadlines(shard)}
	for _, n := range a.Nodes {
		keys = append(keys, s.keys.Node(thread, a.Run, n.ID))
	}
	var startAt int64
	if !a.StartAt.IsZero() {
		startAt = a.StartAt.UnixMilli()
	}
	args := []any{a.Run, thread, a.Digest, Ref(thread, a.Run, ""), string(nodes), s.maxlen,
		activeRun, multitask, inc, startAt, ms(a.StartIn), boolArg(own), s.keys.CancelChannel(), "", a.Trace,
		timeoutMS(a.Timeout), a.TimeoutLabel}
	if multitask == "interrupt" || multitask == "rollback" {
		// The script cancels the active run: it takes its nodes, and checks
		// that they are the ones read here.
		raw, err := s.rdb.HGet(ctx, s.keys.Run(thread, activeID), "nodes").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return SubmitResult{}, "", fmt.Errorf("submit %s: read active run %s: %w", a.Run, activeID, err)
		}
		var ids []string
		_ = json.Unmarshal([]byte(raw), &ids) // none: the script finds no run to cancel
		args[13] = raw
		for _, id := range ids {
			keys = append(keys, s.keys.Node(thread, activeID, id))
			args = append(args, id)
		}
		lim, err := s.nodesLimitKeys(ctx, thread, activeID, ids)
		if err != nil {
			return SubmitResult{}, "", fmt.Errorf("submit %s: read active run %s: %w", a.Run, activeID, err)
		}
		keys = append(keys, lim...)
	}
	var via redis.Scripter = s.rdb
	if trip {
		via = a.Scripter
	}
	v, err := s.scripts["submit"].Run(ctx, via, keys, args...).Result()
	if err != nil {
		return SubmitResult{}, "", fmt.Errorf("submit %s: %w", a.Run, err)
	}
	code, rest, err := reply(s.takeWakes(ctx, v))
	switch {
	case errors.Is(err, errActiveChanged):
		return SubmitResult{}, asString(rest[0]), fmt.Errorf("submit %s: %w", a.Run, err)
	case errors.Is(err, ErrRunConflict) && len(rest) > 0:
		return SubmitResult{}, "", fmt.Errorf("submit %s: thread %q, exists under %q: %w", a.Run, thread, asString(rest[0]), err)
	case errors.Is(err, ErrThreadBusy):
		return SubmitResult{}, "", fmt.Errorf("submit %s: thread %s is running %s: %w", a.Run, thread, asString(rest[0]), err)
	case err != nil:
		return SubmitResult{}, "", fmt.Errorf("submit %s: %w", a.Run, err)
	}
	res := SubmitResult{Thread: thread, Created: code == 1, Status: asString(rest[0]), Incarnation: asString(rest[1]),
		Behind: asString(rest[2]), Ready: asStrings(rest[4:])}
	if start := asInt(rest[3]); start > 0 {
		res.Start = time.UnixMilli(start)
	}
	return res, "", nil
}

// Claimed is a successful claim: the lease and what the worker needs to run
// the node, returned by the same round trip.
type Claimed struct {
	Lease
	Kind        string
	Queue       string
	Input       json.RawMessage
	Timeout     time.Duration // zero: none
	MaxAttempts int
	Dependents  []string
	Descendants []string
	// PrevOwner is set when this claim took the node over from a worker
	// whose lease had expired.
	PrevOwner string
	// Deps are the node's direct dependencies and DepResults their
	// committed results, by id (nil when the node has none). They are read
	// right after the claim: a dependency is SUCCEEDED before its dependent
	// can be claimed and its result never changes again, so every attempt
	// and every takeover of the node sees the same values.
	Deps       []string
	DepResults map[string]json.RawMessage
	// Resume is the answer to the wait the node was parked on (Park,
	// Resume), nil when it was not resumed.
	Resume *Answer
}

// Answer answers a parked node's wait: a value, or, when the wait timed
// out with outcome "fail", an error for the next attempt to fail with.
type Answer struct {
	// Wait is the wait answered.
	Wait  string          `json:"wait,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
}

// KindError is returned (wrapping ErrKindNotServed) when the claiming
// worker does not run the node's kind: the node is left as it was, for a
// worker that does.
type KindError struct {
	Kind, Queue string
	ReadyAt     time.Time // when the node became READY, Redis time
}

func (e *KindError) Error() string {
	return fmt.Sprintf("%v: kind %s on queue %s", ErrKindNotServed, e.Kind, e.Queue)
}
func (e *KindError) Unwrap() error { return ErrKindNotServed }

// NotDueError is returned (wrapping ErrNotDue) when the node is READY but
// its retry backoff runs until ReadyAt, or a rate limit (Limit) is spent
// until then.
type NotDueError struct {
	ReadyAt time.Time
	Limit   string // the rate limit's key; "" for a backoff or a start
}

func (e *NotDueError) Error() string {
	return ErrNotDue.Error() + " until " + e.ReadyAt.UTC().Format(time.RFC3339Nano)
}
func (e *NotDueError) Unwrap() error { return ErrNotDue }

// ExpiredError is returned (wrapping ErrAttemptsExhausted or
// ErrRunCancelled) when a claim found an expired lease that must not be taken
// over. Pass it to Store.Expire to end the node.
type ExpiredError struct {
	Lease       Lease // the expired owner's
	Descendants []string
	Err         error
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("%v (expired owner %s, epoch %d)", e.Err, e.Lease.Owner, e.Lease.Epoch)
}
func (e *ExpiredError) Unwrap() error { return e.Err }

// Claim takes ownership of a node for one attempt under a new epoch. It fails
// with ErrNodeBusy, ErrNodeDone, ErrNodeBlocked, ErrNotFound, a *NotDueError
// or an *ExpiredError; none of them changed anything. A caller that may
// retry after a lost reply uses ClaimAs.
func (s *Store) Claim(ctx context.Context, n NodeRef, owner string, ttl, grace time.Duration) (*Claimed, error) {
	return s.ClaimAs(ctx, n, owner, NewClaimID(), ttl, grace)
}

// ClaimAs is Claim under the caller's claim id (NewClaimID). Retried with
// the same id after a reply was lost, it finds its own earlier claim and
// returns it again: the node is not claimed twice, no attempt is counted
// twice, and no claim is left that nobody holds.
func (s *Store) ClaimAs(ctx context.Context, n NodeRef, owner, claimID string, ttl, grace time.Duration) (*Claimed, error) {
	return s.ClaimKinds(ctx, n, owner, claimID, nil, ttl, grace)
}

// ClaimKinds is ClaimAs for a worker that runs only kinds: a node of another
// kind is refused with a *KindError (wrapping ErrKindNotServed) without
// counting an attempt. No kinds: any kind.
func (s *Store) ClaimKinds(ctx context.Context, n NodeRef, owner, claimID string, kinds []string,
	ttl, grace time.Duration) (c *Claimed, err error) {
	defer s.observe("claim", Lease{Thread: n.Thread, Run: n.Run, Node: n.Node, Owner: owner, ClaimID: claimID},
		time.Now(), &err, func(o *Op) {
			if c != nil {
				o.Epoch, o.Attempt = c.Epoch, c.Attempt
			}
		})
	keys := []string{s.keys.Node(n.Thread, n.Run, n.Node), s.keys.Run(n.Thread, n.Run),
		s.keys.Events(n.Thread, n.Run), s.keys.Leases(ShardOf(n.Thread)), s.keys.Ready(ShardOf(n.Thread))}
	limits := ""
	var (
		v       any
		code    int64
		r       []any
		cluster = s.onCluster()
		take    clusterTake
	)
	leaseTTL := ttl
	for try := 0; ; try++ {
		v, err = s.runReplicated(ctx, "claim", keys, n.Node, owner, claimID, ms(leaseTTL), ms(grace), n.Ref(), s.maxlen,
			kindList(kinds), limits, clusterArg(cluster), take.outcome)
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", n, err)
		}
		v = s.takeWakes(ctx, v)
		code, r, err = reply(v)
		if !errors.Is(err, errLimitKeys) || try > 0 {
			break
		}
		limits = asString(r[0])
		if !cluster {
			// The node has limits: claim it with their keys (one more round
			// trip, only for such nodes).
			keys = append(keys[:5], s.claimLimitKeys(limits)...)
			continue
		}
		// On a cluster the limits are taken in their own slots first
		// (limitcluster.go), then the node is claimed with the outcome.
		if len(r) < 3 {
			return nil, fmt.Errorf("claim %s: unexpected reply %v", n, v)
		}
		if take, err = s.takeLimits(ctx, n, claimID, limits, asString(r[1]), asString(r[2]), ttl); err != nil {
			return nil, fmt.Errorf("claim %s: %w", n, err)
		}
		if leaseTTL = leaseAfter(ttl, take.started); leaseTTL < ttl/2 {
			s.giveBack(ctx, n, claimID, take.taken)
			return nil, fmt.Errorf("claim %s: %w", n, &NotDueError{ReadyAt: time.Now()})
		}
	}
	if cluster && err != nil && IsRefused(err) {
		// Not claimed: the slots taken for it go back; a slot handed to a
		// node that ended before it claimed it, too.
		s.giveBack(ctx, n, claimID, take.taken)
		if errors.Is(err, ErrNodeDone) && len(r) > 0 {
			s.giveBack(ctx, n, "", limitKeyNames(asString(r[0])))
		}
	}
	switch {
	case errors.Is(err, ErrLimitWait):
		if len(r) > 1 {
			if w, ok := r[1].([]any); ok {
				s.wakeAll(ctx, w)
			}
		}
		return nil, fmt.Errorf("claim %s: %w", n, &LimitWaitError{Key: asString(r[0])})
	case errors.Is(err, ErrNotDue):
		nd := &NotDueError{ReadyAt: time.UnixMilli(asInt(r[0]))}
		if len(r) > 1 {
			nd.Limit = asString(r[1])
		}
		return nil, fmt.Errorf("claim %s: %w", n, nd)
	case errors.Is(err, ErrKindNotServed):
		return nil, fmt.Errorf("claim %s: %w", n, &KindError{Kind: asString(r[0]), Queue: asString(r[1]),
			ReadyAt: time.UnixMilli(asInt(r[2]))})
	case errors.Is(err, ErrAttemptsExhausted), errors.Is(err, ErrRunCancelled):
		e := &ExpiredError{Err: err, Lease: Lease{Thread: n.Thread, Run: n.Run, Node: n.Node,
			Epoch: asInt(r[0]), ClaimID: asString(r[1]), Owner: asString(r[2]), Limits: limits}}
		if len(r) > 4 {
			e.Lease.Limits = asString(r[4])
		}
		_ = json.Unmarshal([]byte(asString(r[3])), &e.Descendants)
		return nil, fmt.Errorf("claim %s: %w", n, e)
	case err != nil:
		return nil, fmt.Errorf("claim %s: %w", n, err)
	case code != 1 || len(r) < 13:
		return nil, fmt.Errorf("claim %s: unexpected reply %v", n, v)
	}
	got, err := claimed(n, owner, claimID, r[:10], asString(r[11]), asString(r[12]))
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", n, err)
	}
	got.PrevOwner = asString(r[10])
	// The node's limits as the script read them: a claim replayed after a
	// lost reply answers before it is told them, and its end must free
	// them all the same.
	got.Limits = limits
	if len(r) > 14 {
		got.Limits = asString(r[14])
	}
	if len(r) > 13 && asString(r[13]) != "" {
		if err := json.Unmarshal([]byte(asString(r[13])), &got.Resume); err != nil {
			return nil, fmt.Errorf("claim %s: resume: %w", n, err)
		}
	}
	// A failed read returns an error the caller retries with the same
	// claim id: the claim is replayed and the results read again.
	if err := s.readDeps(ctx, got, nil); err != nil {
		return nil, fmt.Errorf("claim %s: %w", n, err)
	}
	return got, nil
}

// clusterArg is claim.lua's ARGV[10]: "1" on a Redis Cluster.
func clusterArg(cluster bool) string {
	if cluster {
		return "1"
	}
	return ""
}

// kindList is kinds as the scripts take them: ",k1,k2,", or "" for any.
func kindList(kinds []string) string {
	if len(kinds) == 0 {
		return ""
	}
	return "," + strings.Join(kinds, ",") + ","
}

// readDeps reads the committed results of c's direct dependencies in one
// pipeline (one round trip whatever their number; none without deps).
// known holds results the caller has already (a commit's own, for its
// continuation); they are not read again, so a chain's continuation reads
// nothing.
func (s *Store) readDeps(ctx context.Context, c *Claimed, known map[string]json.RawMessage) error {
	if len(c.Deps) == 0 {
		return nil
	}
	c.DepResults = make(map[string]json.RawMessage, len(c.Deps))
	var read []string
	for _, d := range c.Deps {
		if r, ok := known[d]; ok {
			c.DepResults[d] = r
		} else {
			read = append(read, d)
		}
	}
	if len(read) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(read))
	for i, d := range read {
		cmds[i] = pipe.HGet(ctx, s.keys.Node(c.Thread, c.Run, d), "result")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("reading dependency results: %w", err)
	}
	for i, d := range read {
		res := cmds[i].Val()
		if res == "" {
			res = "null" // a committed result is never empty; keep the map total
		}
		c.DepResults[d] = json.RawMessage(res)
	}
	return nil
}

// claimed decodes what claim.lua (and commit.lua for a continuation)
// return for a claim: epoch, attempt, lease_until, kind, queue, input,
// timeout, max_attempts, dependents, descendants; then the incarnation and
// the deps list.
func claimed(n NodeRef, owner, claimID string, r []any, inc, deps string) (*Claimed, error) {
	c := &Claimed{
		Lease: Lease{Thread: n.Thread, Run: n.Run, Node: n.Node, Incarnation: inc, Epoch: asInt(r[0]),
			Attempt: asInt(r[1]), ClaimID: claimID, Owner: owner, Until: time.UnixMilli(asInt(r[2]))},
		Kind: asString(r[3]), Queue: asString(r[4]), Input: json.RawMessage(asString(r[5])),
		Timeout: time.Duration(asInt(r[6])) * time.Millisecond, MaxAttempts: int(asInt(r[7])),
	}
	if err := json.Unmarshal([]byte(asString(r[8])), &c.Dependents); err != nil {
		return nil, fmt.Errorf("dependents: %w", err)
	}
	if err := json.Unmarshal([]byte(asString(r[9])), &c.Descendants); err != nil {
		return nil, fmt.Errorf("descendants: %w", err)
	}
	if err := json.Unmarshal([]byte(cmp.Or(deps, "[]")), &c.Deps); err != nil {
		return nil, fmt.Errorf("deps: %w", err)
	}
	return c, nil
}

// Renewal is an accepted heartbeat.
type Renewal struct {
	Until     time.Time // the new lease deadline, Redis time
	Cancelled bool      // the run was cancelled: stop at a safe point
}

// Beat is one lease to renew in HeartbeatBatch. Progress below zero keeps
// the stored progress.
type Beat struct {
	Lease    Lease
	Progress int
}

func (s *Store) heartbeatArgs(b Beat, ttl time.Duration) ([]string, []any) {
	l := b.Lease
	progress := ""
	if b.Progress >= 0 {
		progress = strconv.Itoa(min(b.Progress, 100))
	}
	keys := []string{s.keys.Node(l.Thread, l.Run, l.Node), s.keys.Run(l.Thread, l.Run),
		s.keys.Events(l.Thread, l.Run), s.keys.Leases(ShardOf(l.Thread))}
	return keys, []any{l.Node, l.Owner, l.Epoch, l.ClaimID, ms(ttl), progress, l.Ref(), s.maxlen}
}

func renewal(l Lease, v any, err error) (Renewal, error) {
	if err != nil {
		return Renewal{}, fmt.Errorf("heartbeat %s: %w", l, err)
	}
	_, r, err := reply(v)
	if err != nil {
		return Renewal{}, fmt.Errorf("heartbeat %s: %w", l, err)
	}
	return Renewal{Until: time.UnixMilli(asInt(r[0])), Cancelled: asInt(r[1]) == 1}, nil
}

// Heartbeat renews one lease and stores progress (below zero: unchanged).
// It never moves a node towards SUCCEEDED. A fenced caller gets
// ErrStaleEpoch, ErrNotOwner or ErrNotRunning (see IsFenced).
func (s *Store) Heartbeat(ctx context.Context, l Lease, ttl time.Duration, progress int) (r Renewal, err error) {
	defer s.observe("heartbeat", l, time.Now(), &err, nil)
	if l.Limits != "" && s.onCluster() {
		// The slots first, then the lease (limitcluster.go).
		started, errs := s.extendClustered(ctx, []Beat{{Lease: l}}, ttl)
		if errs[0] != nil {
			s.giveBackIfEnded(ctx, l, errs[0])
			return Renewal{}, errs[0]
		}
		if ttl = leaseAfter(ttl, started); ttl <= 0 {
			return Renewal{}, fmt.Errorf("heartbeat %s: limits extended too late", l)
		}
	}
	keys, args := s.heartbeatArgs(Beat{Lease: l, Progress: progress}, ttl)
	v, err := s.run(ctx, "heartbeat", keys, args...)
	r, err = renewal(l, v, err)
	_, err = s.packedFence(ctx, l, "heartbeat", err)
	s.giveBackRetaken(ctx, l, err)
	return r, err
}

// giveBackRetaken frees, on a Redis Cluster, the slots a fenced
// heartbeat's extension took again: limit_extend.lua cannot tell a claim
// that ended (its holder freed by the end) from one paused past its
// holder's deadline, and takes a free slot for either; another key's
// extension, or the node's script, then refuses the lease. Without this
// the ended claim would hold the slot until the new deadline, a TTL and
// a half. The give-back is a second call (the slots live in other slots
// of the cluster than the node): a crash between the two leaves the
// holder until that deadline, never longer.
func (s *Store) giveBackRetaken(ctx context.Context, l Lease, err error) {
	if l.Limits == "" || !s.onCluster() || !IsFenced(err) {
		return
	}
	s.freeKeys(ctx, NodeRef{Thread: l.Thread, Run: l.Run, Node: l.Node}, l.ClaimID, limitKeyNames(l.Limits), nil, "")
}

// giveBackIfEnded is giveBackRetaken for a heartbeat that a limit's
// extension refused before the node's script ran: the lease may still be
// live (its node RUNNING under this claim, until its TTL), and its slots
// then stay held until their deadlines; only a claim that has ended, or
// whose node another claim holds, gives them back. One read, only on
// such a refusal.
func (s *Store) giveBackIfEnded(ctx context.Context, l Lease, err error) {
	if l.Limits == "" || !s.onCluster() || !IsFenced(err) {
		return
	}
	f, rerr := s.rdb.HMGet(ctx, s.keys.Node(l.Thread, l.Run, l.Node), "state", "claim").Result()
	if rerr != nil {
		return // the holders run out at their deadlines
	}
	if state, _ := f[0].(string); state == "RUNNING" {
		if claim, _ := f[1].(string); claim == l.ClaimID {
			return
		}
	}
	s.giveBackRetaken(ctx, l, err)
}

// HeartbeatBatch renews many leases in one pipeline: one round trip whatever
// their number. errs[i] is beats[i]'s outcome: nil, a fencing error (see
// IsFenced) or a Redis/network error.
func (s *Store) HeartbeatBatch(ctx context.Context, beats []Beat, ttl time.Duration) ([]Renewal, []error) {
	call := time.Now()
	// On a Redis Cluster the slots of leases with limits are extended
	// first, in one pipeline; a lease whose slot is lost is not renewed
	// (limitcluster.go).
	started, errs := time.Now(), make([]error, len(beats))
	if s.onCluster() {
		started, errs = s.extendClustered(ctx, beats, ttl)
	}
	var send []int
	for i := range beats {
		if errs[i] == nil {
			send = append(send, i)
		}
	}
	cmds := s.runEach(ctx, "heartbeat", len(send), func(j int) ([]string, []any) {
		b := beats[send[j]]
		if b.Lease.Limits != "" && s.onCluster() {
			return s.heartbeatArgs(b, max(leaseAfter(ttl, started), time.Millisecond))
		}
		return s.heartbeatArgs(b, ttl)
	})
	out := make([]Renewal, len(beats))
	for j, i := range send {
		b := beats[i]
		v, err := cmds[j].Result()
		out[i], errs[i] = renewal(b.Lease, v, err)
		_, errs[i] = s.packedFence(ctx, b.Lease, "heartbeat", errs[i]) // a round trip, only for a node gone
		s.giveBackRetaken(ctx, b.Lease, errs[i])
		s.observe("heartbeat", b.Lease, call, &errs[i], nil)
	}
	for i, b := range beats {
		if len(send) < len(beats) && !slices.Contains(send, i) {
			s.giveBackIfEnded(ctx, b.Lease, errs[i])
			s.observe("heartbeat", b.Lease, call, &errs[i], nil)
		}
	}
	return out, errs
}
