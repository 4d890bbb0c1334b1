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
	// StreamMaxLen caps each run's stream of chunks (AppendStream), in
	// entries (approximate MAXLEN); the oldest are trimmed. Zero value:
	// DefaultStreamMaxLen (10000).
	StreamMaxLen int64
	// MaxStreamChunkBytes caps one stream chunk's event and data; a larger
	// one is refused with ErrTooLarge. Zero value: DefaultStreamChunkBytes
	// (1 MiB).
	MaxStreamChunkBytes int
	// Observer, when set, is called after every claim, heartbeat, commit,
	// fail, release and expire with what the caller saw (a history for
	// checkers; see Op). It runs on the caller's goroutine and must be
	// fast. Zero value: none.
	Observer func(Op)
	// ClaimReplicas, when above zero, makes every claim and commit wait
	// until that many replicas acknowledged it (WAIT, on the connection
	// that ran the script) before it returns; with fewer in time it
	// returns a *ReplicationError, and the caller's retry with the same
	// identity replays the write and waits again. A claim so acknowledged
	// survives the failover of its primary to one of those replicas.
	// Zero value: no waiting (Redis replicates asynchronously).
	ClaimReplicas int
	// ReplicaTimeout bounds each wait for ClaimReplicas. Zero value: 1s.
	ReplicaTimeout time.Duration
	// Deprecated: RunRetention is not used. A commit once retained the
	// one-node run it ended; every run is now left to RetainFinished,
	// which packs a SUCCEEDED run into one key (scripts/lua/retain.lua).
	RunRetention time.Duration
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

	replicas       int
	replicaTimeout time.Duration

	ckptHistory int
	ckptBytes   int
	retentionMS int64 // 0: checkpoints never expire

	streamMaxLen     int64 // stream.go
	streamChunkBytes int

	wake wakeFunc // limitops.go
}

// scriptNames are the operations, one file each under scripts/lua.
var scriptNames = []string{"submit", "claim", "heartbeat", "commit", "fail", "release", "cancel", "sweep", "guard",
	"checkpoint", "checkpoint_writes", "checkpoint_delete", "promote", "retry", "retain", "locator", "park", "resume", "delete", "timeout",
	"schedule_put", "schedule_rm", "schedule_fire", "packed_fence", "trace",
	"limit_take", "limit_free", "limit_extend", "limit_use", "limit_set", "limit_conc", "stream_append", "wait_keep",
	"agent_thread_put", "agent_thread_write", "agent_thread_delete", "agent_asst_put", "agent_asst_write", "agent_asst_delete", "agent_ckpt_copy", "agent_ckpt_keep_latest",
	"store_put", "store_get", "store_index", "store_unindex"}

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
		ckptBytes: cmp.Or(opt.MaxCheckpointBytes, DefaultCheckpointBytes),
		replicas:  opt.ClaimReplicas, replicaTimeout: cmp.Or(opt.ReplicaTimeout, time.Second),
		streamMaxLen: cmp.Or(max(opt.StreamMaxLen, 0), DefaultStreamMaxLen), streamChunkBytes: cmp.Or(max(opt.MaxStreamChunkBytes, 0), DefaultStreamChunkBytes)}
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

// Redis returns the client the store talks to, for a caller's reads of
// keys that are not baton's (Asynq's paused queues).
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

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

// runReplicated is run for a write that must reach s.replicas replicas
// before it counts: the script and a WAIT in one pipeline, so on one
// connection (WAIT counts that connection's writes), of the master that
// holds keys[0]. A script that ran but was not acknowledged by enough
// replicas returns its reply with a *ReplicationError.
func (s *Store) runReplicated(ctx context.Context, name string, keys []string, args ...any) (any, error) {
	if s.replicas <= 0 {
		return s.run(ctx, name, keys, args...)
	}
	var c redis.Cmdable = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		c = m
	}
	var wait *redis.Cmd
	ev, err := s.pipeScript(ctx, c, name, keys, args, func(pipe redis.Pipeliner) {
		wait = pipe.Do(ctx, "wait", s.replicas, s.replicaTimeout.Milliseconds())
	})
	if err != nil {
		return nil, err
	}
	v, err := ev.Result()
	if err != nil {
		return v, err
	}
	if err := wait.Err(); err != nil {
		return v, fmt.Errorf("wait for replicas: %w", err)
	}
	if n, _ := wait.Int64(); n < int64(s.replicas) {
		return v, &ReplicationError{Acked: n, Want: int64(s.replicas)}
	}
	return v, nil
}

// pipeScript sends script name and what more adds in one pipeline on c.
// When the script meets NOSCRIPT (a restarted Redis), it loads the script
// and sends the whole pipeline once more (more is called again). Each
// command carries its own error; the error returned is the load's.
func (s *Store) pipeScript(ctx context.Context, c redis.Cmdable, name string, keys []string, args []any,
	more func(redis.Pipeliner)) (*redis.Cmd, error) {
	for try := 0; ; try++ {
		pipe := c.Pipeline()
		cmd := s.scripts[name].EvalSha(ctx, pipe, keys, args...)
		more(pipe)
		_, _ = pipe.Exec(ctx)
		if !isNoScript(cmd.Err()) || try > 0 {
			return cmd, nil
		}
		if err := s.scripts[name].Load(ctx, c).Err(); err != nil {
			return nil, err
		}
	}
}

// runEach runs script name n times in one pipeline, with the keys and
// arguments of call i from args(i): one round trip per Redis node the
// keys live on. Each command carries its own error. A node with an empty
// script cache (restarted, or a replica just promoted: Redis does not
// replicate scripts) answers NOSCRIPT without running anything; those
// calls go once more as EVAL, which caches the script on the node that
// runs it. Not SCRIPT LOAD: on a cluster that must reach every node, and
// fails while one is down, which is exactly when a promoted replica is
// met (seen in internal/e2e's failover test as lost heartbeats).
func (s *Store) runEach(ctx context.Context, name string, n int, args func(i int) ([]string, []any)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	pipe := s.rdb.Pipeline()
	for i := range cmds {
		keys, argv := args(i)
		cmds[i] = s.scripts[name].EvalSha(ctx, pipe, keys, argv...)
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, c := range cmds {
		if isNoScript(c.Err()) {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	pipe = s.rdb.Pipeline()
	for _, i := range again {
		keys, argv := args(i)
		cmds[i] = s.scripts[name].Eval(ctx, pipe, keys, argv...)
	}
	_, _ = pipe.Exec(ctx)
	return cmds
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

// boolArg is a script's flag argument: "1" for true, "" for false.
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return ""
}
