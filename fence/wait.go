package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Wait is what a parked node waits for: a person's answer, an outside
// event. The node holds no lease and no worker while it waits.
type Wait struct {
	// ID names the wait (made by Park; the same on a retry): a resume
	// answers one wait, so a late answer to an earlier wait of the same
	// node is refused.
	ID string `json:"id"`
	// Request is what the node asks, JSON, shown in the views. Empty: null.
	Request json.RawMessage `json:"request"`
	// Timeout, when above zero, ends the wait after that long, Redis time,
	// as OnTimeout says: "fail" (the default) fails the node's next
	// attempt without running it; "resume" resumes it with Default.
	Timeout   time.Duration   `json:"-"`
	OnTimeout string          `json:"-"`
	Default   json.RawMessage `json:"-"`
}

// Parked says what Park did.
type Parked struct {
	WaitID string
	// Cancelled: the run was cancelled, so the node is CANCELLED instead;
	// RunStatus is the run's status then.
	Cancelled bool
	RunStatus string
}

// Park ends l's attempt by parking its node: WAITING with w.Request, its
// lease released, the attempt not counted (park.lua). Fenced as Commit:
// only l's current claim of a RUNNING node; a refusal matches IsFenced.
// Retried after a lost reply with the same w.ID, it answers as the first
// time.
func (s *Store) Park(ctx context.Context, l Lease, w Wait) (Parked, error) {
	if w.ID == "" {
		w.ID = NewClaimID()
	}
	if err := ValidateID("wait id", w.ID); err != nil {
		return Parked{}, fmt.Errorf("park %s: %w", l, err)
	}
	req := string(w.Request)
	if req == "" {
		req = "null"
	}
	if !json.Valid([]byte(req)) {
		return Parked{}, fmt.Errorf("park %s: request is not JSON: %w", l, ErrInvalidData)
	}
	on, def := w.OnTimeout, string(w.Default)
	switch on {
	case "", "fail":
		on = "fail"
	case "resume":
	default:
		return Parked{}, fmt.Errorf("park %s: on timeout %q: %w: want fail or resume", l, on, ErrInvalidData)
	}
	if def == "" {
		def = "null"
	}
	if !json.Valid([]byte(def)) {
		return Parked{}, fmt.Errorf("park %s: default value is not JSON: %w", l, ErrInvalidData)
	}
	if n := len(req) + len(def); n > s.ckptBytes {
		return Parked{}, fmt.Errorf("park %s: request %d bytes, at most %d: %w", l, n, s.ckptBytes, ErrTooLarge)
	}
	sh := ShardOf(l.Thread)
	keys := []string{s.keys.Node(l.Thread, l.Run, l.Node), s.keys.Run(l.Thread, l.Run),
		s.keys.Events(l.Thread, l.Run), s.keys.Leases(sh), s.keys.Finished(sh), s.keys.Waits(sh)}
	keys = append(keys, s.endLimitKeys(l.Limits, Spend{})...)
	v, err := s.run(ctx, "park", keys, l.Node, l.Owner, l.Epoch, l.ClaimID, req, w.ID, ms(w.Timeout), on, def,
		l.Ref(), s.maxlen)
	if err != nil {
		return Parked{}, fmt.Errorf("park %s: %w", l, err)
	}
	v = s.takeWakes(ctx, v)
	code, r, err := reply(v)
	if err != nil {
		answer, perr := s.packedAnswer(ctx, l, "park", fmt.Errorf("park %s: %w", l, err))
		if perr != nil {
			return Parked{}, perr
		}
		code, r, _ = reply(answer) // the run was packed since this claim parked the node
	}
	s.freeClustered(ctx, l, Spend{}, false)
	if code == 3 {
		return Parked{Cancelled: true, RunStatus: asString(r[0])}, nil
	}
	// The thread's state lives while the node waits. Best effort here:
	// park.lua left the node's waits entry due, so a sweeper keeps it
	// alive if this call fails.
	_ = s.keepWait(ctx, NodeRef{Thread: l.Thread, Run: l.Run, Node: l.Node})
	return Parked{WaitID: asString(r[0])}, nil
}

// Resumed says what Resume did.
type Resumed struct {
	Thread string
	// Answer is the answer the wait has: this call's, or, on a Replay,
	// the first resume's.
	Answer Answer
	// Replay: the wait was answered already; nothing changed.
	Replay bool
	// Queue and Attempt, when the node is READY (after this resume, or on a
	// Replay while its next attempt has not started): enqueue its attempt
	// Attempt+1 on Queue; a repeat of that enqueue is a no-op.
	Queue   string
	Attempt int64
}

// Resume answers the wait waitID of a parked node with value (JSON): the
// node is READY again and its next attempt receives the value
// (Claimed.Resume). waitID empty: the wait the node is parked on now, as
// read before the script, which is still fenced by it. A second resume of
// the same wait is a Replay that returns the first answer. A node not
// waiting (or waiting on another wait) is ErrNotWaiting; a cancelled or
// finished run is ErrRunDone; an unknown run or node ErrNotFound.
func (s *Store) Resume(ctx context.Context, run, node, waitID string, value json.RawMessage, who string) (Resumed, error) {
	if err := ValidateID("run id", run); err != nil {
		return Resumed{}, err
	}
	if err := ValidateID("node id", node); err != nil {
		return Resumed{}, err
	}
	if len(value) == 0 {
		value = json.RawMessage("null")
	}
	if !json.Valid(value) {
		return Resumed{}, fmt.Errorf("resume %s/%s: value is not JSON: %w", run, node, ErrInvalidData)
	}
	if len(value) > s.ckptBytes {
		return Resumed{}, fmt.Errorf("resume %s/%s: value %d bytes, at most %d: %w", run, node, len(value), s.ckptBytes, ErrTooLarge)
	}
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return Resumed{}, fmt.Errorf("resume %s/%s: %w", run, node, err)
	}
	if waitID == "" {
		cur, err := s.rdb.HGet(ctx, s.keys.Node(thread, run, node), "wait_id").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Resumed{}, fmt.Errorf("resume %s/%s: %w", run, node, err)
		}
		waitID = cur // none: the script says what the node is
	} else if err := ValidateID("wait id", waitID); err != nil {
		return Resumed{}, err
	}
	res, err := s.resume(ctx, NodeRef{Thread: thread, Run: run, Node: node}, waitID, string(value), who, "resume")
	if err != nil {
		return Resumed{}, fmt.Errorf("resume %s/%s: %w", run, node, err)
	}
	return res, nil
}

func (s *Store) resume(ctx context.Context, n NodeRef, waitID, value, who, mode string) (Resumed, error) {
	sh := ShardOf(n.Thread)
	keys := []string{s.keys.Node(n.Thread, n.Run, n.Node), s.keys.Run(n.Thread, n.Run),
		s.keys.Events(n.Thread, n.Run), s.keys.Ready(sh), s.keys.Waits(sh)}
	v, err := s.run(ctx, "resume", keys, n.Node, waitID, value, who, n.Ref(), s.maxlen, mode)
	if err != nil {
		return Resumed{}, err
	}
	code, r, err := reply(v)
	switch {
	case errors.Is(err, ErrNotFound) && len(r) > 0:
		return Resumed{}, fmt.Errorf("run %s has no node %s: %w", n.Run, n.Node, ErrUnknownNode)
	case errors.Is(err, ErrNotFound) && mode == "resume":
		return s.resumePacked(ctx, n, waitID, err)
	case errors.Is(err, ErrRunDone) && len(r) > 1 && (asString(r[0]) == "CANCELLED" || asString(r[1]) == "1"):
		return Resumed{}, fmt.Errorf("run %s was cancelled: %w: %w", n.Run, err, ErrRunCancelled)
	case errors.Is(err, ErrRunDone) && len(r) > 0:
		return Resumed{}, fmt.Errorf("run %s is %s: %w", n.Run, asString(r[0]), err)
	case errors.Is(err, ErrNotWaiting) && waitID == "":
		return Resumed{}, fmt.Errorf("%w: nothing parked it", err)
	case errors.Is(err, ErrNotWaiting) && mode == "resume":
		if other := s.waitOwner(ctx, n, waitID); other != "" {
			return Resumed{}, fmt.Errorf("wait_id %q is a wait of node %s, not of node %s: %w",
				waitID, other, n.Node, ErrInvalidData)
		}
		return Resumed{}, err
	case err != nil:
		return Resumed{}, err
	}
	out := Resumed{Thread: n.Thread}
	if code == 2 {
		out.Replay = true
		if a := asString(r[0]); a != "" {
			_ = json.Unmarshal([]byte(a), &out.Answer) // stored by resume.lua: JSON
		}
		if len(r) > 3 && asString(r[1]) == "READY" && asString(r[2]) != "" {
			out.Queue, out.Attempt = asString(r[2]), asInt(r[3])
		}
		return out, nil
	}
	out.Queue, out.Attempt = asString(r[0]), asInt(r[1])
	if mode == "resume" {
		out.Answer = Answer{Wait: waitID, Value: json.RawMessage(value)}
	}
	return out, nil
}

// resumePacked answers a resume whose script found neither node nor run
// hash: a run packed into one key (retention) ended, so nothing changes;
// a wait the node answered is a Replay with its first answer, as before
// the run was packed. notFound is returned when the run is not packed.
func (s *Store) resumePacked(ctx context.Context, n NodeRef, waitID string, notFound error) (Resumed, error) {
	p, err := s.packedOf(ctx, n.Thread, n.Run)
	if err != nil {
		return Resumed{}, err
	}
	if p == nil {
		return Resumed{}, notFound
	}
	node := p.nodeOrNil(n.Node)
	if node == nil {
		return Resumed{}, fmt.Errorf("run %s has no node %s: %w", n.Run, n.Node, ErrUnknownNode)
	}
	if waitID == "" {
		waitID = node["wait_id"]
	}
	first := node["answer:"+waitID]
	if first == "" && waitID != "" && node["resumed_wait"] == waitID {
		first = node["resume"]
	}
	if first != "" {
		out := Resumed{Thread: n.Thread, Replay: true}
		_ = json.Unmarshal([]byte(first), &out.Answer) // stored by resume.lua: JSON
		return out, nil
	}
	if p.Run["status"] == "CANCELLED" || p.Run["cancel"] == "1" {
		return Resumed{}, fmt.Errorf("run %s was cancelled: %w: %w", n.Run, ErrRunDone, ErrRunCancelled)
	}
	return Resumed{}, fmt.Errorf("run %s is %s: %w", n.Run, p.Run["status"], ErrRunDone)
}

// waitOwner names the node of n's run, other than n's, that parked on
// waitID or answered it: "" when none did. A read for the refusal's
// words only; nothing is changed.
func (s *Store) waitOwner(ctx context.Context, n NodeRef, waitID string) string {
	ids, err := s.nodeIDs(ctx, n.Thread, n.Run)
	if err != nil {
		return ""
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, s.keys.Node(n.Thread, n.Run, id), "wait_id", "answer:"+waitID)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return ""
	}
	for i, id := range ids {
		v := cmds[i].Val()
		if id != n.Node && len(v) == 2 && (v[0] == waitID || v[1] != nil) {
			return id
		}
	}
	return ""
}

// TimedOut is a parked node whose wait timed out, now READY.
type TimedOut struct {
	Node    NodeRef
	Queue   string
	Attempt int64
}

// TimeOutWaits ends the waits whose timeout passed, up to limit per shard,
// as each park said (resume.lua mode timeout), and returns the nodes now
// READY for the caller to enqueue. A wait not timed out whose entry came
// due has its thread's state kept alive (keepWait). The waits index is a
// trigger: the scripts decide.
func (s *Store) TimeOutWaits(ctx context.Context, who string, limit int64) ([]TimedOut, error) {
	now, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("time out waits: %w", err)
	}
	pipe := s.rdb.Pipeline()
	due := make([]*redis.StringSliceCmd, Shards)
	for i := range due {
		due[i] = pipe.ZRangeByScore(ctx, s.keys.Waits(i), &redis.ZRangeBy{Min: "-inf",
			Max: fmt.Sprint(now.UnixMilli()), Count: limit})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("time out waits: %w", err)
	}
	var out []TimedOut
	var errs []error
	for _, c := range due {
		for _, ref := range c.Val() {
			thread, run, node, ok := ParseRef(ref)
			if !ok {
				continue
			}
			n := NodeRef{Thread: thread, Run: run, Node: node}
			f, err := s.rdb.HMGet(ctx, s.keys.Node(thread, run, node), "state", "wait_id", "wait_timeout_at").Result()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			state, waitID, timeoutAt := asString(f[0]), asString(f[1]), asString(f[2])
			if state == "WAITING" && (timeoutAt == "" || asInt(timeoutAt) > now.UnixMilli()) {
				// Not timed out: the entry is due for its thread state's
				// keep-alive.
				if err := s.keepWait(ctx, n); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			res, err := s.resume(ctx, n, waitID, "", who, "timeout")
			switch {
			case err == nil && !res.Replay:
				out = append(out, TimedOut{Node: n, Queue: res.Queue, Attempt: res.Attempt})
			case err == nil, errors.Is(err, ErrNotWaiting), errors.Is(err, ErrLeaseActive):
			case errors.Is(err, ErrRunDone), errors.Is(err, ErrNotFound), errors.Is(err, ErrUnknownNode):
				s.rdb.ZRem(ctx, s.keys.Waits(ShardOf(thread)), ref) // nothing will answer it
			default:
				errs = append(errs, fmt.Errorf("%s: %w", n, err))
			}
		}
	}
	return out, errors.Join(errs...)
}
