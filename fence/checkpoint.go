package fence

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Checkpoint is one saved state of a thread, in one namespace. Checkpoints
// belong to the thread, not to a run: they outlive the runs that wrote them,
// so the thread's next run (or the next attempt of a node) resumes from them.
type Checkpoint struct {
	Thread string `json:"thread"`
	NS     string `json:"ns"`
	// Version is assigned by the store: strictly increasing per thread and
	// namespace, never reused.
	Version  int64           `json:"version"`
	ID       string          `json:"id"`
	Parent   string          `json:"parent,omitempty"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Who wrote it: the run, node and epoch of the claim, and Redis time.
	Run    string    `json:"run"`
	Node   string    `json:"node"`
	Epoch  int64     `json:"epoch"`
	Worker string    `json:"worker,omitempty"`
	At     time.Time `json:"at"`
}

// CheckpointWrite is a checkpoint to save.
type CheckpointWrite struct {
	NS string
	// ID names the checkpoint (LangGraph's checkpoint id fits). Saving the
	// same ID again under the same claim (a retry after a lost reply)
	// returns the version saved the first time. Empty: a new id is made,
	// so a retry would save a second version; pass one to retry safely.
	ID       string
	Parent   string          // the checkpoint this one follows, or ""
	Data     json.RawMessage // JSON
	Metadata json.RawMessage // JSON, or empty
}

// PendingWrite is one write a task produced after a checkpoint (LangGraph's
// putWrites), kept so a resumed step does not run the task again.
type PendingWrite struct {
	Task    string          `json:"task"`
	Idx     int             `json:"idx"`
	Channel string          `json:"channel"`
	Value   json.RawMessage `json:"value"`
}

// Checkpoint defaults (Options).
const (
	DefaultCheckpointHistory = 100
	DefaultThreadRetention   = 30 * 24 * time.Hour
	DefaultCheckpointBytes   = 1 << 20
)

// MaxNSLen is the longest accepted checkpoint namespace in bytes.
const MaxNSLen = 256

// ValidateNS reports whether ns may name a checkpoint namespace. The empty
// namespace (a graph's root) is valid; otherwise the ID characters plus ':'
// and '|', which LangGraph's nested namespaces use ("outer:task|inner").
func ValidateNS(ns string) error {
	if len(ns) > MaxNSLen {
		return fmt.Errorf("ns: %w: %d bytes, at most %d", ErrInvalidID, len(ns), MaxNSLen)
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
			c == '.' || c == '_' || c == '-' || c == ':' || c == '|' {
			continue
		}
		r, _ := utf8.DecodeRuneInString(ns[i:])
		return fmt.Errorf("ns %q: %w: %q at byte %d (allowed: A-Z a-z 0-9 . _ - : |)", ns, ErrInvalidID, r, i)
	}
	return nil
}

// ckptKeys are the keys checkpoint.lua and checkpoint_writes.lua take.
func (s *Store) ckptKeys(l Lease, ns string) []string {
	nsKeys := s.keys.CheckpointNS(l.Thread, ns)
	return []string{s.keys.Node(l.Thread, l.Run, l.Node), s.keys.Events(l.Thread, l.Run),
		s.keys.Active(l.Thread), s.keys.Checkpoints(l.Thread), nsKeys[0], nsKeys[1], nsKeys[2], nsKeys[3]}
}

// SaveCheckpoint saves a checkpoint of l's thread, if and only if l is the
// current claim of a RUNNING node of the thread's active run. A refusal
// changes nothing, is recorded as stale_rejected (op=checkpoint), and
// matches IsFenced: the handler must stop. ErrTooLarge and ErrInvalidID
// report bad input; nothing is stored.
func (s *Store) SaveCheckpoint(ctx context.Context, l Lease, w CheckpointWrite) (Checkpoint, error) {
	if err := ValidateNS(w.NS); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", l, err)
	}
	if w.ID == "" {
		w.ID = NewClaimID()
	}
	if err := ValidateID("checkpoint id", w.ID); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", l, err)
	}
	if w.Parent != "" {
		if err := ValidateID("checkpoint parent id", w.Parent); err != nil {
			return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", l, err)
		}
	}
	if !json.Valid(w.Data) {
		return Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: data is not JSON: %w", l, w.NS, ErrInvalidData)
	}
	meta := cmp.Or(string(w.Metadata), "{}")
	if !json.Valid([]byte(meta)) {
		return Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: metadata is not JSON: %w", l, w.NS, ErrInvalidData)
	}
	if n := len(w.Data) + len(meta); n > s.ckptBytes {
		return Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: %d bytes, at most %d: %w", l, w.NS, n, s.ckptBytes, ErrTooLarge)
	}
	v, err := s.run(ctx, "checkpoint", s.ckptKeys(l, w.NS), l.Node, l.Run, l.Thread, l.Owner, l.Epoch, l.ClaimID,
		w.NS, w.ID, w.Parent, string(w.Data), meta, s.ckptHistory, s.retentionMS, s.ckptBytes, s.maxlen)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: %w", l, w.NS, err)
	}
	_, r, err := reply(v)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s ns %q: %w", l, w.NS, err)
	}
	return Checkpoint{Thread: l.Thread, NS: w.NS, Version: asInt(r[0]), ID: w.ID, Parent: w.Parent,
		Data: w.Data, Metadata: json.RawMessage(meta), Run: l.Run, Node: l.Node, Epoch: l.Epoch,
		Worker: l.Owner, At: time.UnixMilli(asInt(r[1]))}, nil
}

// PutWrites stores a task's pending writes against checkpoint id of l's
// thread, fenced as SaveCheckpoint. A write with Idx >= 0 is kept once;
// Idx < 0 (LangGraph's error and interrupt channels) overwrites. It
// returns how many writes were stored.
func (s *Store) PutWrites(ctx context.Context, l Lease, ns, id, task string, writes []PendingWrite) (int, error) {
	if err := ValidateNS(ns); err != nil {
		return 0, fmt.Errorf("put writes %s: %w", l, err)
	}
	if err := ValidateID("checkpoint id", id); err != nil {
		return 0, fmt.Errorf("put writes %s: %w", l, err)
	}
	if task == "" {
		return 0, fmt.Errorf("put writes %s: task id: %w: empty", l, ErrInvalidID)
	}
	pairs := make([][2]any, len(writes))
	for i, w := range writes {
		w.Task = task
		if len(w.Value) == 0 {
			w.Value = json.RawMessage("null")
		}
		b, err := json.Marshal(w)
		if err != nil {
			return 0, fmt.Errorf("put writes %s: write %d: %w", l, i, err)
		}
		pairs[i] = [2]any{w.Idx, string(b)}
	}
	arg, _ := json.Marshal(pairs) // strings and ints only
	if len(arg) > s.ckptBytes {
		return 0, fmt.Errorf("put writes %s: %d bytes, at most %d: %w", l, len(arg), s.ckptBytes, ErrTooLarge)
	}
	v, err := s.run(ctx, "checkpoint_writes", s.ckptKeys(l, ns), l.Node, l.Run, l.Thread, l.Owner, l.Epoch,
		l.ClaimID, ns, id, task, string(arg), s.retentionMS, s.ckptBytes, s.maxlen)
	if err != nil {
		return 0, fmt.Errorf("put writes %s ns %q: %w", l, ns, err)
	}
	_, r, err := reply(v)
	if err != nil {
		return 0, fmt.Errorf("put writes %s ns %q: %w", l, ns, err)
	}
	return int(asInt(r[0])), nil
}

// record is what checkpoint.lua keeps in "<v>:i".
type record struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	Run    string `json:"run"`
	Node   string `json:"node"`
	Epoch  int64  `json:"epoch"`
	Worker string `json:"worker"`
	At     int64  `json:"at"`
}

// readCheckpoints reads the given versions of one namespace, in order,
// skipping any that were trimmed meanwhile.
func (s *Store) readCheckpoints(ctx context.Context, thread, ns string, versions []string) ([]Checkpoint, error) {
	if len(versions) == 0 {
		return nil, nil
	}
	fields := make([]string, 0, 3*len(versions))
	for _, v := range versions {
		fields = append(fields, v+":d", v+":m", v+":i")
	}
	vals, err := s.rdb.HMGet(ctx, s.keys.CheckpointNS(thread, ns)[1], fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s ns %q: %w", thread, ns, err)
	}
	out := make([]Checkpoint, 0, len(versions))
	for i, v := range versions {
		data, meta, info := asString(vals[3*i]), asString(vals[3*i+1]), asString(vals[3*i+2])
		if info == "" {
			continue
		}
		var rec record
		if err := json.Unmarshal([]byte(info), &rec); err != nil {
			return nil, fmt.Errorf("checkpoint %s ns %q v%s: %w", thread, ns, v, err)
		}
		version, _ := strconv.ParseInt(v, 10, 64)
		out = append(out, Checkpoint{Thread: thread, NS: ns, Version: version, ID: rec.ID, Parent: rec.Parent,
			Data: json.RawMessage(data), Metadata: json.RawMessage(meta), Run: rec.Run, Node: rec.Node,
			Epoch: rec.Epoch, Worker: rec.Worker, At: time.UnixMilli(rec.At)})
	}
	return out, nil
}

func checkThreadNS(thread, ns string) error {
	if err := ValidateID("thread", thread); err != nil {
		return err
	}
	return ValidateNS(ns)
}

// LatestCheckpoint returns the newest checkpoint of thread in ns, or
// ErrNoCheckpoint.
func (s *Store) LatestCheckpoint(ctx context.Context, thread, ns string) (*Checkpoint, error) {
	list, _, err := s.Checkpoints(ctx, thread, ns, 0, 1)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("thread %s ns %q: %w", thread, ns, ErrNoCheckpoint)
	}
	return &list[0], nil
}

// CheckpointByID returns the checkpoint of thread in ns named id, or
// ErrNoCheckpoint.
func (s *Store) CheckpointByID(ctx context.Context, thread, ns, id string) (*Checkpoint, error) {
	if err := checkThreadNS(thread, ns); err != nil {
		return nil, err
	}
	if err := ValidateID("checkpoint id", id); err != nil {
		return nil, err
	}
	v, err := s.rdb.HGet(ctx, s.keys.CheckpointNS(thread, ns)[2], id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("thread %s ns %q checkpoint %s: %w", thread, ns, id, ErrNoCheckpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("thread %s ns %q checkpoint %s: %w", thread, ns, id, err)
	}
	list, err := s.readCheckpoints(ctx, thread, ns, []string{v})
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("thread %s ns %q checkpoint %s: %w", thread, ns, id, ErrNoCheckpoint)
	}
	return &list[0], nil
}

// Checkpoints lists up to limit checkpoints of thread in ns, newest first,
// with versions below before (0: from the newest). next is the cursor for
// the following page, 0 when there is none.
func (s *Store) Checkpoints(ctx context.Context, thread, ns string, before int64, limit int) (list []Checkpoint, next int64, err error) {
	if err := checkThreadNS(thread, ns); err != nil {
		return nil, 0, err
	}
	limit = max(1, min(limit, 1000))
	maxScore := "+inf"
	if before > 0 {
		maxScore = "(" + strconv.FormatInt(before, 10)
	}
	versions, err := s.rdb.ZRevRangeByScore(ctx, s.keys.CheckpointNS(thread, ns)[0], &redis.ZRangeBy{
		Max: maxScore, Min: "-inf", Count: int64(limit) + 1}).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoints of %s ns %q: %w", thread, ns, err)
	}
	more := len(versions) > limit
	if more {
		versions = versions[:limit]
	}
	list, err = s.readCheckpoints(ctx, thread, ns, versions)
	if err != nil {
		return nil, 0, err
	}
	if more && len(versions) > 0 {
		next, _ = strconv.ParseInt(versions[len(versions)-1], 10, 64)
	}
	return list, next, nil
}

// PendingWrites returns the writes stored against checkpoint id of thread
// in ns, by task and index.
func (s *Store) PendingWrites(ctx context.Context, thread, ns, id string) ([]PendingWrite, error) {
	if err := checkThreadNS(thread, ns); err != nil {
		return nil, err
	}
	keys := s.keys.CheckpointNS(thread, ns)
	v, err := s.rdb.HGet(ctx, keys[2], id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	raw, err := s.rdb.HGet(ctx, keys[1], v+":w").Result()
	if errors.Is(err, redis.Nil) || raw == "{}" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	var fields []string
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	vals, err := s.rdb.HMGet(ctx, keys[3], fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("pending writes of %s ns %q: %w", thread, ns, err)
	}
	out := make([]PendingWrite, 0, len(vals))
	for _, x := range vals {
		var w PendingWrite
		if err := json.Unmarshal([]byte(asString(x)), &w); err == nil {
			out = append(out, w)
		}
	}
	return out, nil
}

// CheckpointNamespaces returns the namespaces of thread that hold
// checkpoints, each with its newest version.
func (s *Store) CheckpointNamespaces(ctx context.Context, thread string) (map[string]int64, error) {
	if err := ValidateID("thread", thread); err != nil {
		return nil, err
	}
	names, err := s.rdb.HKeys(ctx, s.keys.Checkpoints(thread)).Result()
	if err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", thread, err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(names))
	for i, ns := range names {
		cmds[i] = pipe.ZRevRange(ctx, s.keys.CheckpointNS(thread, ns)[0], 0, 0)
	}
	if len(names) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("checkpoints of %s: %w", thread, err)
		}
	}
	out := map[string]int64{}
	for i, ns := range names {
		if v := cmds[i].Val(); len(v) == 1 {
			out[ns], _ = strconv.ParseInt(v[0], 10, 64)
		}
	}
	return out, nil
}

// DeleteCheckpoints deletes every checkpoint of thread. It is refused with
// ErrThreadBusy while the thread has an active run. Versions are not
// reused afterwards.
func (s *Store) DeleteCheckpoints(ctx context.Context, thread string) (int, error) {
	if err := ValidateID("thread", thread); err != nil {
		return 0, err
	}
	return s.deleteCheckpoints(ctx, thread, "thread", "")
}

// DeleteThreadCheckpoints deletes every checkpoint of l's thread from
// inside its active run (LangGraph's deleteThread, called by a saver that
// holds a lease), if and only if l is the current claim of a RUNNING node
// of that run. A refusal changes nothing, is recorded as stale_rejected
// (op=checkpoint_delete) and matches IsFenced. Versions are not reused.
func (s *Store) DeleteThreadCheckpoints(ctx context.Context, l Lease) (int, error) {
	if err := ValidateID("thread", l.Thread); err != nil {
		return 0, err
	}
	return s.deleteCheckpointsAs(ctx, l.Thread, "lease", l.Run, &l)
}

// deleteCheckpoints runs checkpoint_delete.lua in mode thread or run.
func (s *Store) deleteCheckpoints(ctx context.Context, thread, mode, run string) (int, error) {
	return s.deleteCheckpointsAs(ctx, thread, mode, run, nil)
}

// deleteCheckpointsAs runs checkpoint_delete.lua, reading the thread's
// namespaces and active run first and again when they changed meanwhile.
// l is the caller's lease in mode lease, else nil.
func (s *Store) deleteCheckpointsAs(ctx context.Context, thread, mode, run string, l *Lease) (int, error) {
	// Mode lease names the caller's node and events; the other modes pass
	// a key of the thread in their place, so every key stays in its slot.
	nodeKey, evKey := s.keys.Checkpoints(thread), s.keys.Checkpoints(thread)
	lease := []any{"", "", "", "", ""}
	if l != nil {
		nodeKey, evKey = s.keys.Node(l.Thread, l.Run, l.Node), s.keys.Events(l.Thread, l.Run)
		lease = []any{l.Thread, l.Node, l.Owner, l.Epoch, l.ClaimID}
	}
	for try := 0; ; try++ {
		active, err := s.rdb.Get(ctx, s.keys.Active(thread)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("delete checkpoints of %s: %w", thread, err)
		}
		names, err := s.rdb.HKeys(ctx, s.keys.Checkpoints(thread)).Result()
		if err != nil {
			return 0, fmt.Errorf("delete checkpoints of %s: %w", thread, err)
		}
		activeKey := s.keys.Checkpoints(thread)
		if active != "" {
			activeKey = s.keys.Run(thread, active)
		}
		keys := []string{s.keys.Active(thread), activeKey, s.keys.Checkpoints(thread), nodeKey, evKey}
		args := append(append([]any{mode, run, active}, lease...), s.maxlen)
		for _, ns := range names {
			k := s.keys.CheckpointNS(thread, ns)
			keys = append(keys, k[0], k[1], k[2], k[3])
			args = append(args, ns)
		}
		v, err := s.run(ctx, "checkpoint_delete", keys, args...)
		if err != nil {
			return 0, fmt.Errorf("delete checkpoints of %s: %w", thread, err)
		}
		_, r, err := reply(v)
		switch {
		case errors.Is(err, errActiveChanged) && try < 5:
			continue
		case errors.Is(err, ErrThreadBusy):
			return 0, fmt.Errorf("delete checkpoints of %s: run %s is active: %w", thread, asString(r[0]), err)
		case err != nil:
			return 0, fmt.Errorf("delete checkpoints of %s: %w", thread, err)
		}
		return int(asInt(r[0])), nil
	}
}
