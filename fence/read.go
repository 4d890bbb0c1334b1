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

// RunInfo is a run as stored, with its nodes in spec order.
type RunInfo struct {
	ID           string     `json:"id"`
	Thread       string     `json:"thread,omitempty"`
	Status       string     `json:"status"`
	Cancelled    bool       `json:"cancelled,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	Nodes        []NodeInfo `json:"nodes"`
	CancelReason string     `json:"cancel_reason,omitempty"`
	// Behind is the run this one waits behind while QUEUED: the thread's
	// active run now, read with the run (not the one active at submit,
	// which may have ended since). Empty once the run has started.
	Behind string `json:"behind,omitempty"`
	// StartAt is when the run's first nodes become due, when a start_at
	// or start_in put it after the submission.
	StartAt *time.Time `json:"start_at,omitempty"`
	// Timeout is the run's timeout as its spec wrote it ("10m"), and
	// Deadline when it cancels what is left of the run, Redis time; nil
	// once it has fired, or for a run without one.
	Timeout  string     `json:"timeout,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// TraceID is the OpenTelemetry trace of the run (32 hex digits) when
	// its submitter traced it.
	TraceID string `json:"trace_id,omitempty"`
	// Multitask is the thread's multitask strategy the run was submitted
	// with ("" for a run without a thread). Not in the JSON of a run: the
	// Agent Server API shows it as its multitask_strategy.
	Multitask string `json:"-"`
}

// NodeInfo is a node as stored.
type NodeInfo struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	State   string `json:"state"`
	Attempt int64  `json:"attempt"`
	// Releases counts attempts handed back (release.lua, park.lua)
	// without being used: Attempt - Releases is what counts against
	// MaxAttempts (AttemptsUsed). Attempt is the number the events give
	// the node's latest claim.
	Releases    int64           `json:"releases"`
	Epoch       int64           `json:"epoch"`
	Owner       string          `json:"owner"`
	Progress    int             `json:"progress"`
	Result      json.RawMessage `json:"result"`
	Error       string          `json:"error"`
	Deps        []string        `json:"deps,omitempty"`
	Queue       string          `json:"queue,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	LeaseUntil  *time.Time      `json:"lease_until,omitempty"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`  // of the last attempt
	FinishedAt  *time.Time      `json:"finished_at,omitempty"` // when it became terminal
	// ReadyAt is when a READY node became, or becomes, due: in the future
	// for a run delayed by start_at/start_in or a retry's backoff.
	ReadyAt *time.Time `json:"ready_at,omitempty"`
	// Waiting says why a READY node is not running, when the reader knows
	// (runner.Client.Status: "waiting: no runner serves kind summarize on
	// queue default").
	Waiting string `json:"waiting,omitempty"`
	// Wait is what a WAITING (parked) node waits for; a resume answers it.
	Wait *WaitInfo `json:"wait,omitempty"`
	// AttemptsUsed is Attempt - Releases (at least 0): what counts
	// against MaxAttempts, as the status table's USED column shows it.
	AttemptsUsed int64 `json:"attempts_used"`
}

// WaitInfo is a parked node's wait as stored.
type WaitInfo struct {
	ID        string          `json:"id"`
	Request   json.RawMessage `json:"request"`
	Since     *time.Time      `json:"since,omitempty"`
	TimeoutAt *time.Time      `json:"timeout_at,omitempty"`
}

// Locate returns the thread a run lives under, or ErrNotFound.
func (s *Store) Locate(ctx context.Context, run string) (string, error) {
	pipe := s.rdb.Pipeline()
	l := s.locate(ctx, pipe, run)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	thread, ok := l.thread()
	if !ok {
		return "", fmt.Errorf("run %s: %w", run, ErrNotFound)
	}
	return thread, nil
}

// location is a run's locator and whether a run of that id without a
// thread exists, read together (one slot: one round trip, on a cluster
// too). A run of a thread has a locator; a run without one has none
// (locator.lua), though one stored before that has its own.
//
// A finished run may be packed into one key (Keys.Packed) in place of its
// hashes and stream: either key says a run without a thread exists.
type location struct {
	run         string
	loc         *redis.StringCmd
	own, packed *redis.IntCmd
}

// locate reads a run's location in pipe. Each key is its own EXISTS: a
// command on several keys is refused while their slot migrates.
func (s *Store) locate(ctx context.Context, pipe redis.Pipeliner, run string) location {
	return location{run: run, loc: pipe.Get(ctx, s.keys.Locator(run)),
		own: pipe.Exists(ctx, s.keys.Run(run, run)), packed: pipe.Exists(ctx, s.keys.Packed(run, run))}
}

// thread is the thread the run lives under, if it exists.
func (l location) thread() (string, bool) {
	if t := l.loc.Val(); t != "" {
		return t, true
	}
	return l.run, l.own.Val() == 1 || l.packed.Val() == 1
}

func (s *Store) nodeIDs(ctx context.Context, thread, run string) ([]string, error) {
	raw, err := s.rdb.HGet(ctx, s.keys.Run(thread, run), "nodes").Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("run %s: %w", run, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	if err := json.Unmarshal([]byte(raw), &ids); err != nil {
		return nil, fmt.Errorf("run %s: node list: %w", run, err)
	}
	return ids, nil
}

var nodeFields = []string{"id", "kind", "state", "attempt", "epoch", "owner", "progress",
	"result", "error", "deps", "queue", "max_attempts", "lease_until", "started_at", "finished_at", "releases",
	"wait_id", "wait", "wait_at", "wait_timeout_at", "ready_at", "waits"}

// GetRun reads a run and all its nodes: two round trips plus the locator.
// The nodes are read in one pipeline, not one atomic step; each node's
// fields are consistent with each other.
func (s *Store) GetRun(ctx context.Context, run string) (*RunInfo, error) {
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return nil, err
	}
	h, err := s.rdb.HGetAll(ctx, s.keys.Run(thread, run)).Result()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	var packed *packedRun
	if len(h) == 0 {
		if packed, err = s.packedOf(ctx, thread, run); err != nil {
			return nil, err
		}
		if packed == nil {
			return nil, fmt.Errorf("run %s: %w", run, ErrNotFound)
		}
		h = packed.Run
	}
	info := &RunInfo{ID: run, Status: h["status"], Cancelled: h["cancel"] == "1",
		CreatedAt: msTime(h["created_at"]), CancelReason: h["cancel_reason"], TraceID: traceID(h["trace"]),
		Multitask: h["multitask"]}
	if thread != run {
		info.Thread = thread
	}
	if st := msTime(h["start_at"]); st.After(info.CreatedAt) {
		info.StartAt = &st
	}
	info.Timeout = h["timeout"]
	if h["deadline_at"] != "" {
		d := msTime(h["deadline_at"])
		info.Deadline = &d
	}
	if info.Status == "QUEUED" {
		// The run stored as active at submit may have ended since; the one
		// this run waits behind is the thread's active run now.
		active, err := s.rdb.Get(ctx, s.keys.Active(thread)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("run %s: %w", run, err)
		}
		info.Behind = cmp.Or(active, h["behind"])
	}
	if f := h["finished_at"]; f != "" {
		t := msTime(f)
		info.FinishedAt = &t
	}
	var ids []string
	if err := json.Unmarshal([]byte(h["nodes"]), &ids); err != nil {
		return nil, fmt.Errorf("run %s: node list: %w", run, err)
	}
	cmds := make([]*redis.SliceCmd, len(ids))
	if packed == nil {
		pipe := s.rdb.Pipeline()
		for i, id := range ids {
			cmds[i] = pipe.HMGet(ctx, s.keys.Node(thread, run, id), nodeFields...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("run %s: nodes: %w", run, err)
		}
	}
	if packed == nil {
		for i := range ids {
			if cmds[i].Val()[2] != nil {
				continue
			}
			// A node gone since the run hash was read: the retention may
			// have packed the run in between. Read it whole from there.
			if p, err := s.packedOf(ctx, thread, run); err == nil && p != nil {
				return s.GetRun(ctx, run)
			}
			break
		}
	}
	for i, id := range ids {
		var str func(j int) string
		if packed == nil {
			v := cmds[i].Val()
			str = func(j int) string { s, _ := v[j].(string); return s }
		} else {
			var h map[string]string
			if i < len(packed.Nodes) {
				h = packed.Nodes[i]
			}
			str = func(j int) string { return h[nodeFields[j]] }
		}
		n := NodeInfo{ID: id, Kind: str(1), State: str(2), Attempt: asInt(str(3)), Epoch: asInt(str(4)),
			Owner: str(5), Progress: int(asInt(str(6))), Error: str(8), Queue: str(10), MaxAttempts: int(asInt(str(11)))}
		if n.State == "SUCCEEDED" { // commit.lua stores no progress
			n.Progress = 100
			n.Error = "" // an earlier attempt's: the node succeeded since
		}
		if r := str(7); r != "" {
			n.Result = json.RawMessage(r)
		}
		if d := str(9); d != "" && d != "[]" { // a retained run keeps no empty list
			_ = json.Unmarshal([]byte(d), &n.Deps)
		}
		if n.State == "RUNNING" {
			n.LeaseUntil = msTimePtr(str(12))
		}
		n.StartedAt = msTimePtr(str(13))
		n.FinishedAt = msTimePtr(str(14))
		n.Releases = asInt(str(15))
		n.AttemptsUsed = max(n.Attempt-n.Releases, 0)
		if n.State == "READY" {
			n.ReadyAt = msTimePtr(str(20))
			n.Waiting = limitWaiting(str(21), n.ReadyAt) // limitstate.go
		}
		if n.State == "WAITING" {
			n.Owner = "" // parked: no worker holds it (park.lua released its lease)
			n.Wait = &WaitInfo{ID: str(16), Request: json.RawMessage(cmp.Or(str(17), "null")),
				Since: msTimePtr(str(18)), TimeoutAt: msTimePtr(str(19))}
		}
		info.Nodes = append(info.Nodes, n)
	}
	return info, nil
}

// Event is one entry of a run's event stream.
type Event struct {
	ID     string    `json:"id"` // stream id: pass as after to read on
	Type   string    `json:"type"`
	Node   string    `json:"node,omitempty"`
	Epoch  int64     `json:"epoch"`
	Worker string    `json:"worker,omitempty"`
	At     time.Time `json:"at"`
	// Details holds the type's other fields (attempt, error, prev_owner,
	// current_epoch, op, reason, status, ...).
	Details map[string]string `json:"details,omitempty"`
}

// Events reads up to count events after the stream id after ("" or "0":
// from the start). count <= 0 reads all.
func (s *Store) Events(ctx context.Context, run, after string, count int64) ([]Event, error) {
	thread, err := s.Locate(ctx, run)
	if err != nil {
		return nil, err
	}
	msgs, err := s.eventsAfter(ctx, thread, run, after, count)
	if err != nil {
		return nil, fmt.Errorf("events %s: %w", run, err)
	}
	return eventsOf(msgs), nil
}

// eventsAfter reads up to count stream entries after the stream id after
// ("" or "0": from the start; count <= 0: all). A packed run's events are
// in its packed key, followed by any late write's refusal recorded since
// in a stream of its own (packed_fence.lua): both are read in one
// transaction.
func (s *Store) eventsAfter(ctx context.Context, thread, run, after string, count int64) ([]redis.XMessage, error) {
	start := "-"
	if after != "" && after != "0" {
		start = "(" + after
	}
	// One transaction: a retention packing the run between the two reads
	// would otherwise show its events twice.
	pipe := s.rdb.TxPipeline()
	var stream *redis.XMessageSliceCmd
	if count > 0 {
		stream = pipe.XRangeN(ctx, s.keys.Events(thread, run), start, "+", count)
	} else {
		stream = pipe.XRange(ctx, s.keys.Events(thread, run), start, "+")
	}
	packed := pipe.Get(ctx, s.keys.Packed(thread, run))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	msgs := stream.Val()
	raw, err := packed.Bytes()
	if err != nil {
		return msgs, nil // not packed
	}
	p, err := unpackRun(raw)
	if err != nil {
		return nil, err
	}
	out := append(p.eventsAfter(after, 0), msgs...)
	if count > 0 && int64(len(out)) > count {
		out = out[:count]
	}
	return out, nil
}

// ListRuns returns run ids, newest first, offset and limit applied.
func (s *Store) ListRuns(ctx context.Context, offset, limit int64) ([]string, error) {
	zs, err := s.listRuns(ctx, offset, limit)
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i], _ = z.Member.(string)
	}
	return out, err
}

// listRuns is the run listing's entries (run id, submit time), newest
// first, offset and limit applied. Each shard lists its own runs; this
// merges the shards' newest offset+limit, so a deep page costs more than
// the first. One round trip per Redis node.
func (s *Store) listRuns(ctx context.Context, offset, limit int64) ([]redis.Z, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, Shards)
	for i := range cmds {
		cmds[i] = pipe.ZRevRangeWithScores(ctx, s.keys.Runs(i), 0, offset+limit-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var all []redis.Z
	for _, c := range cmds {
		all = append(all, c.Val()...)
	}
	slices.SortFunc(all, func(a, b redis.Z) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return strings.Compare(asString(b.Member), asString(a.Member))
	})
	return all[min(offset, int64(len(all))):min(offset+limit, int64(len(all)))], nil
}

// RunSummary is a run's status and counters, read without its nodes.
type RunSummary struct {
	ID     string `json:"id"`
	Thread string `json:"thread,omitempty"`
	Status string `json:"status"`
	Nodes  int    `json:"nodes"`
	Done   int    `json:"done"` // nodes terminal
	// Waiting counts the run's nodes parked until a resume (WAITING).
	Waiting int `json:"waiting,omitempty"`
}

// Summaries reads many runs' summaries in two pipelined round trips. Runs
// that do not exist are left out.
func (s *Store) Summaries(ctx context.Context, runs []string) ([]RunSummary, error) {
	pipe := s.rdb.Pipeline()
	locs := make([]location, len(runs))
	for i, r := range runs {
		locs[i] = s.locate(ctx, pipe, r)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("summaries: %w", err)
	}
	pipe = s.rdb.Pipeline()
	hs := make([]*redis.SliceCmd, len(runs))
	threads := make([]string, len(runs))
	for i, r := range runs {
		if t, ok := locs[i].thread(); ok {
			threads[i] = t
			hs[i] = pipe.HMGet(ctx, s.keys.Run(t, r), "status", "total", "terminal", "waiting")
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("summaries: %w", err)
	}
	out := make([]RunSummary, 0, len(runs))
	for i, r := range runs {
		if hs[i] == nil {
			continue
		}
		v := hs[i].Val()
		if v[0] == nil { // packed, or gone
			p, err := s.packedOf(ctx, threads[i], r)
			if err != nil {
				return nil, fmt.Errorf("summaries: %w", err)
			}
			if p == nil {
				continue
			}
			v = []any{p.Run["status"], p.Run["total"], p.Run["terminal"], p.Run["waiting"]}
		}
		sum := RunSummary{ID: r, Status: asString(v[0]), Nodes: int(asInt(asString(v[1]))), Done: int(asInt(asString(v[2]))),
			Waiting: int(asInt(asString(v[3])))}
		if t := threads[i]; t != r {
			sum.Thread = t
		}
		out = append(out, sum)
	}
	return out, nil
}

// NodePeek is the little the sweeper needs to enqueue a node.
type NodePeek struct {
	State   string
	Queue   string
	Attempt int64
	Kind    string
}

// Peek reads state, queue and attempt of many nodes in one pipeline.
func (s *Store) Peek(ctx context.Context, refs []NodeRef) ([]NodePeek, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(refs))
	for i, r := range refs {
		cmds[i] = pipe.HMGet(ctx, s.keys.Node(r.Thread, r.Run, r.Node), "state", "queue", "attempt", "kind")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("peek: %w", err)
	}
	out := make([]NodePeek, len(refs))
	for i := range refs {
		v := cmds[i].Val()
		out[i] = NodePeek{State: asString(v[0]), Queue: asString(v[1]), Attempt: asInt(asString(v[2])),
			Kind: asString(v[3])}
	}
	return out, nil
}

// RetryPolicy reads a node's retry policy as submitted (NodeSpec.Retry; ""
// for none) and its attempts used (attempt - releases). Workers read it
// when an attempt fails, so a claim carries nothing more.
func (s *Store) RetryPolicy(ctx context.Context, n NodeRef) (string, int64, error) {
	v, err := s.rdb.HMGet(ctx, s.keys.Node(n.Thread, n.Run, n.Node), "retry", "attempt", "releases").Result()
	if err != nil {
		return "", 0, fmt.Errorf("retry policy %s: %w", n, err)
	}
	return asString(v[0]), asInt(asString(v[1])) - asInt(asString(v[2])), nil
}

func msTimePtr(s string) *time.Time {
	if s == "" {
		return nil
	}
	t := msTime(s)
	return &t
}

func msTime(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(n)
}

// RunTrace returns the trace context the run was submitted with (see
// SubmitArgs.Trace), "" when none: what an attempt whose delivery did not
// carry it (a takeover, a redelivery by the sweeper) joins.
//
// submitted is when the run was submitted (zero if it does not exist): the
// start of the root span a runner gives a run that has no trace.
func (s *Store) RunTrace(ctx context.Context, ref NodeRef) (trace string, submitted time.Time, err error) {
	v, err := s.rdb.HMGet(ctx, s.keys.Run(ref.Thread, ref.Run), "trace", "created_at").Result()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("run %s: trace: %w", ref.Run, err)
	}
	trace, _ = v[0].(string)
	if at, _ := v[1].(string); at != "" {
		submitted = msTime(at)
	}
	return trace, submitted, nil
}

// AdoptRunTrace gives the run of ref the trace context carrier (the root
// span a runner started for it) unless it has one already, and returns the
// run's trace context: carrier, or the earlier one. A run submitted
// without a trace gets one this way, from the first runner that runs a
// node of it. It returns "" for a run that does not exist, and changes
// nothing then. Safe to retry: a retry finds its own value.
func (s *Store) AdoptRunTrace(ctx context.Context, ref NodeRef, carrier string) (string, error) {
	if carrier == "" {
		return "", fmt.Errorf("run %s: adopt trace: empty trace context", ref.Run)
	}
	v, err := s.run(ctx, "trace", []string{s.keys.Run(ref.Thread, ref.Run)}, carrier)
	if err != nil {
		return "", fmt.Errorf("run %s: adopt trace: %w", ref.Run, err)
	}
	trace, _ := v.(string)
	return trace, nil
}

// traceID is the trace id of a stored trace context
// ("00-<trace id>-<span id>-<flags>"), "" when it has none.
func traceID(carrier string) string {
	parts := strings.SplitN(carrier, "-", 4)
	if len(parts) < 3 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}
