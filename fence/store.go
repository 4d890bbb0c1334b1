package fence

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configures a Store. A nil *Options takes every default.
type Options struct {
	// Keys names the keys. Zero value: prefix "baton".
	Keys Keys
	// EventMaxLen caps each run's event stream (approximate MAXLEN).
	// Zero value: 10000.
	EventMaxLen int64
	// CheckpointHistory is how many checkpoints each thread keeps per
	// namespace, the newest. Zero value: DefaultCheckpointHistory (100).
	CheckpointHistory int
	// ThreadRetention is how long a thread's checkpoints live after their
	// last write; negative keeps them forever. Zero value:
	// DefaultThreadRetention (30 days).
	ThreadRetention time.Duration
	// MaxCheckpointBytes caps a checkpoint's data and metadata together,
	// and a task's pending writes together. Zero value:
	// DefaultCheckpointBytes (1 MiB).
	MaxCheckpointBytes int
	// Observer, when set, is called after every claim, heartbeat, commit,
	// fail, release and expire with what the caller saw (a history for
	// checkers; see Op). It runs on the caller's goroutine and must be
	// fast. Zero value: none.
	Observer func(Op)
}

// Store binds the ownership scripts to one Redis (or Redis Cluster) client.
// It is safe for concurrent use. It holds no ownership state of its own:
// every decision is made by a script in Redis.
type Store struct {
	rdb      redis.UniversalClient
	keys     Keys
	maxlen   string
	scripts  map[string]*redis.Script
	observer func(Op)

	ckptHistory int
	ckptBytes   int
	retentionMS int64 // 0: checkpoints never expire
}

// scriptNames are the operations, one file each under scripts/lua.
var scriptNames = []string{"submit", "claim", "heartbeat", "commit", "fail", "release", "cancel", "sweep", "guard",
	"checkpoint", "checkpoint_writes", "checkpoint_delete", "promote", "retry", "compact"}

// New returns a Store over rdb.
func New(rdb redis.UniversalClient, opt *Options) *Store {
	if opt == nil {
		opt = &Options{}
	}
	maxlen := opt.EventMaxLen
	if maxlen <= 0 {
		maxlen = 10000
	}
	s := &Store{rdb: rdb, keys: opt.Keys, maxlen: strconv.FormatInt(maxlen, 10), scripts: map[string]*redis.Script{},
		observer: opt.Observer, ckptHistory: cmp.Or(opt.CheckpointHistory, DefaultCheckpointHistory),
		ckptBytes: cmp.Or(opt.MaxCheckpointBytes, DefaultCheckpointBytes)}
	if r := cmp.Or(opt.ThreadRetention, DefaultThreadRetention); r > 0 {
		s.retentionMS = max(r.Milliseconds(), 1)
	}
	for _, name := range scriptNames {
		s.scripts[name] = redis.NewScript(mustScript(name))
	}
	return s
}

// Keys returns the key builder the store uses.
func (s *Store) Keys() Keys { return s.keys }

// Load loads every script into Redis's script cache. Pipelined calls send
// only EVALSHA, so call Load at start-up; the store calls it again itself
// when a pipeline meets NOSCRIPT (after a Redis restart).
func (s *Store) Load(ctx context.Context) error {
	for _, name := range scriptNames {
		if err := s.scripts[name].Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("fence: load %s.lua: %w", name, err)
		}
	}
	return nil
}

// NewClaimID returns a random claim id, unique per claim.
func NewClaimID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// newIncarnation returns a new run incarnation id (Lease.Incarnation).
func newIncarnation() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// NodeRef names one node.
type NodeRef struct {
	Thread string
	Run    string
	Node   string
}

// Ref is the node's member in the global indexes.
func (r NodeRef) Ref() string { return Ref(r.Thread, r.Run, r.Node) }

func (r NodeRef) String() string { return r.Run + "/" + r.Node }

func (s *Store) run(ctx context.Context, name string, keys []string, args ...any) (any, error) {
	return s.scripts[name].Run(ctx, s.rdb, keys, args...).Result()
}

// reply decodes a script reply: a bare integer is a code; an array starts
// with one. Codes below zero become their sentinel error.
func reply(v any) (int64, []any, error) {
	switch r := v.(type) {
	case int64:
		if r < 0 {
			return r, nil, codeError(r)
		}
		return r, nil, nil
	case []any:
		if len(r) == 0 {
			return 0, nil, errors.New("fence: empty script reply")
		}
		code, ok := r[0].(int64)
		if !ok {
			return 0, nil, fmt.Errorf("fence: script reply starts with %T, want a code", r[0])
		}
		if code < 0 {
			return code, r[1:], codeError(code)
		}
		return code, r[1:], nil
	default:
		return 0, nil, fmt.Errorf("fence: unexpected script reply %T", v)
	}
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}

func asStrings(vs []any) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, asString(v))
	}
	return out
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
