package fence

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

func agentThreadOf(thread string, h map[string]string) *AgentThread {
	t := &AgentThread{ID: thread, CreatedAt: msTime(h["created_at"]).UTC(), UpdatedAt: msTime(h["updated_at"]).UTC(),
		Metadata: []byte(h["metadata"]), SnapRun: h["snap_run"], Snap: []byte(h["snap"])}
	t.Rev, _ = strconv.ParseInt(h["rev"], 10, 64)
	if len(t.Metadata) == 0 {
		t.Metadata = []byte("{}")
	}
	if len(t.Snap) == 0 {
		t.Snap = nil
	}
	return t
}

// PutAgentThread creates an API thread's record with metadata (a JSON
// object) unless it exists (agent_thread_put.lua). ifExists "raise"
// refuses an existing one with ErrExists; "do_nothing" returns it with
// created false. op identifies the call: a retry with the same op answers
// as the first call did.
func (s *Store) PutAgentThread(ctx context.Context, thread string, metadata []byte, ifExists, op string) (*AgentThread, bool, error) {
	if err := ValidateID("thread id", thread); err != nil {
		return nil, false, err
	}
	if err := validateOp(op); err != nil {
		return nil, false, err
	}
	if !json.Valid(metadata) {
		return nil, false, fmt.Errorf("thread %s: metadata: %w", thread, ErrInvalidData)
	}
	v, err := s.run(ctx, "agent_thread_put", []string{s.keys.AgentThread(thread), s.keys.AgentThreads(ShardOf(thread))},
		thread, string(metadata), ifExists, op)
	if err != nil {
		return nil, false, fmt.Errorf("put thread %s: %w", thread, err)
	}
	code, r, err := reply(v)
	if err != nil {
		return nil, false, fmt.Errorf("put thread %s: %w", thread, err)
	}
	return agentThreadOf(thread, flatHash(r)), code == 1, nil
}

// AgentThread reads an API thread's record, or ErrNotFound.
func (s *Store) AgentThread(ctx context.Context, thread string) (*AgentThread, error) {
	if err := ValidateID("thread id", thread); err != nil {
		return nil, err
	}
	h, err := s.rdb.HGetAll(ctx, s.keys.AgentThread(thread)).Result()
	if err != nil {
		return nil, fmt.Errorf("thread %s: %w", thread, err)
	}
	if len(h) == 0 {
		return nil, fmt.Errorf("thread %s: %w", thread, ErrNotFound)
	}
	return agentThreadOf(thread, h), nil
}

// AgentThreads reads the records of threads in one pipeline; a missing
// one is left out.
func (s *Store) AgentThreads(ctx context.Context, threads []string) ([]*AgentThread, error) {
	keys := make([]string, len(threads))
	for i, t := range threads {
		if err := ValidateID("thread id", t); err != nil {
			return nil, err
		}
		keys[i] = s.keys.AgentThread(t)
	}
	hs, err := s.hashes(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("threads: %w", err)
	}
	out := make([]*AgentThread, 0, len(threads))
	for i, h := range hs {
		if h != nil {
			out = append(out, agentThreadOf(threads[i], h))
		}
	}
	return out, nil
}

// AgentThreadIDs lists every API thread record's id, oldest first. It
// reads each shard's index: its cost grows with the number of threads.
func (s *Store) AgentThreadIDs(ctx context.Context) ([]string, error) {
	zs, err := s.agentIndexed(ctx, s.keys.AgentThreads)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	slices.SortStableFunc(zs, func(a, b redis.Z) int { return int(a.Score - b.Score) })
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = asString(z.Member)
	}
	return out, nil
}

// WriteAgentThread sets fields of an API thread's record
// (agent_thread_write.lua) if its rev is still rev, as read: else
// ErrRecordChanged, and the caller reads again. A missing record is
// ErrNotFound. Fields: "metadata" (a JSON object), "snap_run", "snap".
func (s *Store) WriteAgentThread(ctx context.Context, thread string, rev int64, op string, fields map[string]string) (*AgentThread, error) {
	if err := ValidateID("thread id", thread); err != nil {
		return nil, err
	}
	if err := validateOp(op); err != nil {
		return nil, err
	}
	args := []any{op, strconv.FormatInt(rev, 10)}
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		switch f {
		case "metadata", "snap_run", "snap":
		default:
			return nil, fmt.Errorf("thread %s: field %q cannot be written", thread, f)
		}
		args = append(args, f, fields[f])
	}
	v, err := s.run(ctx, "agent_thread_write", []string{s.keys.AgentThread(thread)}, args...)
	if err != nil {
		return nil, fmt.Errorf("write thread %s: %w", thread, err)
	}
	_, r, err := reply(v)
	if err != nil {
		return nil, fmt.Errorf("write thread %s: %w", thread, err)
	}
	return agentThreadOf(thread, flatHash(r)), nil
}

// DeleteAgentThread deletes an API thread's record
// (agent_thread_delete.lua); a missing one is ErrNotFound. A retry with the
// same op after a lost reply answers as the first call did. Baton's
// thread state (checkpoints, runs) is not touched: DeleteCheckpoints first.
func (s *Store) DeleteAgentThread(ctx context.Context, thread, op string) error {
	if err := ValidateID("thread id", thread); err != nil {
		return err
	}
	if err := validateOp(op); err != nil {
		return err
	}
	v, err := s.run(ctx, "agent_thread_delete", []string{s.keys.AgentThread(thread),
		s.keys.AgentThreads(ShardOf(thread)), s.keys.AgentThreadGone(thread)}, thread, op)
	if err != nil {
		return fmt.Errorf("delete thread %s: %w", thread, err)
	}
	if _, _, err := reply(v); err != nil {
		return fmt.Errorf("delete thread %s: %w", thread, err)
	}
	return nil
}
