package fence

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	v, err := s.run(ctx, "checkpoint", append(s.ckptKeys(l, w.NS), s.keys.Packed(l.Thread, l.Run)), l.Node, l.Run, l.Thread, l.Owner, l.Epoch, l.ClaimID,
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

// DeleteCheckpoints deletes every checkpoint of thread, with its pending
// writes. It is refused with ErrThreadBusy while the thread's active run is
// RUNNING (a run without a thread is the active run of the thread of its
// id). Versions are not reused afterwards.
func (s *Store) DeleteCheckpoints(ctx context.Context, thread string) (int, error) {
	if err := ValidateID("thread", thread); err != nil {
		return 0, err
	}
	return s.deleteCheckpointsAs(ctx, thread, "thread", "", nil)
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

// deleteCheckpointsAs runs checkpoint_delete.lua, reading the thread's
// namespaces and active run first and again when they changed meanwhile.
// l is the caller's lease in mode lease, else nil.
func (s *Store) deleteCheckpointsAs(ctx context.Context, thread, mode, run string, l *Lease) (int, error) {
	// Mode lease names the caller's node and events; the other modes pass
	// a key of the thread in their place, so every key stays in its slot.
	nodeKey, evKey := s.keys.Checkpoints(thread), s.keys.Checkpoints(thread)
	lease := []any{thread, "", "", "", ""}
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
		// The active run: the key's, else the run whose id is the thread.
		keys := []string{s.keys.Active(thread), s.keys.Run(thread, cmp.Or(active, thread)), s.keys.Checkpoints(thread), nodeKey, evKey}
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
