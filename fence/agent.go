package fence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Agent Server API (package agentapi) keeps two records of its own
// beside baton's: a thread's record (its metadata and times; the thread's
// runs and checkpoints are baton's) and assistants. Each write is one
// script (scripts/lua/agent_*.lua) that a retry after a lost reply, with
// the same op id, answers as the first call did.

var (
	// ErrExists: a create with if_exists "raise" found the record.
	ErrExists = errors.New("fence: already exists")
	// ErrRecordChanged: the record changed between the caller's read and
	// its write; read it again and retry.
	ErrRecordChanged = errors.New("fence: record changed since read")
	// ErrNoVersion: an assistant has no version of that number.
	ErrNoVersion = errors.New("fence: no such version")
)

func init() {
	codeErrors[-70] = ErrExists
	codeErrors[-71] = ErrRecordChanged
	codeErrors[-72] = ErrNoVersion
}

// AgentThread is an API thread's record: its metadata and times, Redis
// time. Rev counts its writes (a write names the rev it read). SnapRun and
// Snap are what the API remembers of the thread's state after a state
// update run SnapRun (its values and status), as JSON.
type AgentThread struct {
	ID        string
	CreatedAt time.Time
	UpdatedAt time.Time
	Metadata  []byte // a JSON object
	Rev       int64
	SnapRun   string
	Snap      []byte
}

// AgentThread is the record of an API thread, in the thread's slot.
func (k Keys) AgentThread(thread string) string { return k.tagged(thread, "api") }

// AgentThreadGone remembers, for a while, the op that deleted the thread's
// record.
func (k Keys) AgentThreadGone(thread string) string { return k.tagged(thread, "apigone") }

// AgentThreads indexes a shard's API thread records (thread -> created_at
// ms), for search.
func (k Keys) AgentThreads(shard int) string { return k.index(shard, "apithreads") }

// Assistant is an API assistant's hash, in its id's shard.
func (k Keys) Assistant(id string) string { return k.index(ShardOf(id), "asst/"+id) }

// AssistantVersions is an API assistant's versions (N -> JSON, "N:at" ->
// ms).
func (k Keys) AssistantVersions(id string) string { return k.index(ShardOf(id), "asstv/"+id) }

// AssistantGone remembers, for a while, the op that deleted an assistant.
func (k Keys) AssistantGone(id string) string { return k.index(ShardOf(id), "asstgone/"+id) }

// Assistants indexes a shard's API assistants (id -> created_at ms).
func (k Keys) Assistants(shard int) string { return k.index(shard, "assistants") }

// flatHash turns an HGETALL-shaped reply (field, value, ...) into a map.
func flatHash(r []any) map[string]string {
	h := make(map[string]string, len(r)/2)
	for i := 0; i+1 < len(r); i += 2 {
		h[asString(r[i])] = asString(r[i+1])
	}
	return h
}

// agentIndexed lists the members of one index of every shard (name builds the
// shard's key), oldest first within each shard.
func (s *Store) agentIndexed(ctx context.Context, name func(int) string) ([]redis.Z, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, Shards)
	for i := range cmds {
		cmds[i] = pipe.ZRangeWithScores(ctx, name(i), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var out []redis.Z
	for _, c := range cmds {
		out = append(out, c.Val()...)
	}
	return out, nil
}

// hashes reads the hashes keys in one pipeline; a missing one is nil.
func (s *Store) hashes(ctx context.Context, keys []string) ([]map[string]string, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, k)
	}
	if len(keys) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	out := make([]map[string]string, len(keys))
	for i, c := range cmds {
		if h := c.Val(); len(h) > 0 {
			out[i] = h
		}
	}
	return out, nil
}

func validateOp(op string) error {
	if op == "" {
		return fmt.Errorf("op id: %w: empty", ErrInvalidID)
	}
	return ValidateID("op id", op)
}
