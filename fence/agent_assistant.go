package fence

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Assistant is an API assistant as stored: Fields holds its current
// fields as JSON texts (graph_id, name, description, config, context,
// metadata), which this package never interprets; Version is the current
// version, Max the highest, Rev counts writes. Times are Redis time.
type Assistant struct {
	ID        string
	Fields    map[string]string
	Version   int64
	Max       int64
	Rev       int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// AssistantVersion is one stored version: its fields as one JSON object,
// and when it was made.
type AssistantVersion struct {
	Version   int64
	Doc       []byte
	CreatedAt time.Time
}

// assistantFields are the fields a caller stores (as JSON texts).
var assistantFields = []string{"graph_id", "name", "description", "config", "context", "metadata"}

func assistantOf(id string, h map[string]string) *Assistant {
	a := &Assistant{ID: id, Fields: map[string]string{}, CreatedAt: msTime(h["created_at"]).UTC(),
		UpdatedAt: msTime(h["updated_at"]).UTC()}
	for _, f := range assistantFields {
		if v, ok := h[f]; ok {
			a.Fields[f] = v
		}
	}
	a.Version, _ = strconv.ParseInt(h["version"], 10, 64)
	a.Max, _ = strconv.ParseInt(h["max"], 10, 64)
	a.Rev, _ = strconv.ParseInt(h["rev"], 10, 64)
	return a
}

func fieldArgs(fields map[string]string) ([]any, error) {
	var args []any
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(assistantFields, f) {
			return nil, fmt.Errorf("assistant field %q cannot be written", f)
		}
		args = append(args, f, fields[f])
	}
	return args, nil
}

// PutAssistant creates an assistant at version 1 with fields, and v1 as
// its first version (agent_asst_put.lua), unless it exists: ifExists
// "raise" refuses with ErrExists, "do_nothing" returns it with created
// false. A retry with the same op answers as the first call did.
func (s *Store) PutAssistant(ctx context.Context, id string, fields map[string]string, v1 []byte, ifExists, op string) (*Assistant, bool, error) {
	if err := ValidateID("assistant id", id); err != nil {
		return nil, false, err
	}
	if err := validateOp(op); err != nil {
		return nil, false, err
	}
	fa, err := fieldArgs(fields)
	if err != nil {
		return nil, false, err
	}
	args := append([]any{id, op, ifExists, string(v1)}, fa...)
	v, err := s.run(ctx, "agent_asst_put", []string{s.keys.Assistant(id), s.keys.AssistantVersions(id),
		s.keys.Assistants(ShardOf(id))}, args...)
	if err != nil {
		return nil, false, fmt.Errorf("put assistant %s: %w", id, err)
	}
	code, r, err := reply(v)
	if err != nil {
		return nil, false, fmt.Errorf("put assistant %s: %w", id, err)
	}
	return assistantOf(id, flatHash(r)), code == 1, nil
}

// GetAssistant reads an assistant, or ErrNotFound.
func (s *Store) GetAssistant(ctx context.Context, id string) (*Assistant, error) {
	as, err := s.GetAssistants(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if len(as) == 0 {
		return nil, fmt.Errorf("assistant %s: %w", id, ErrNotFound)
	}
	return as[0], nil
}

// GetAssistants reads assistants in one pipeline; a missing one is left
// out.
func (s *Store) GetAssistants(ctx context.Context, ids []string) ([]*Assistant, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		if err := ValidateID("assistant id", id); err != nil {
			return nil, err
		}
		keys[i] = s.keys.Assistant(id)
	}
	hs, err := s.hashes(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("assistants: %w", err)
	}
	out := make([]*Assistant, 0, len(ids))
	for i, h := range hs {
		if h != nil {
			out = append(out, assistantOf(ids[i], h))
		}
	}
	return out, nil
}

// AssistantIDs lists every assistant's id.
func (s *Store) AssistantIDs(ctx context.Context) ([]string, error) {
	zs, err := s.agentIndexed(ctx, s.keys.Assistants)
	if err != nil {
		return nil, fmt.Errorf("list assistants: %w", err)
	}
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = asString(z.Member)
	}
	return out, nil
}

// AssistantVersions returns an assistant's versions, newest first.
func (s *Store) AssistantVersions(ctx context.Context, id string) ([]AssistantVersion, error) {
	if err := ValidateID("assistant id", id); err != nil {
		return nil, err
	}
	h, err := s.rdb.HGetAll(ctx, s.keys.AssistantVersions(id)).Result()
	if err != nil {
		return nil, fmt.Errorf("assistant %s versions: %w", id, err)
	}
	var out []AssistantVersion
	for k, doc := range h {
		if strings.Contains(k, ":") {
			continue
		}
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, AssistantVersion{Version: n, Doc: []byte(doc), CreatedAt: msTime(h[k+":at"]).UTC()})
	}
	slices.SortFunc(out, func(a, b AssistantVersion) int { return int(b.Version - a.Version) })
	return out, nil
}

// WriteAssistant sets fields of an assistant (agent_asst_write.lua) if its
// rev is still rev, as read, else ErrRecordChanged. With version 0 it adds
// doc as a new version (the highest + 1) and makes it current; otherwise it
// makes that existing version current (ErrNoVersion when there is none). A
// missing assistant is ErrNotFound. A retry with the same op answers as
// the first call did.
func (s *Store) WriteAssistant(ctx context.Context, id string, rev, version int64, doc []byte, fields map[string]string, op string) (*Assistant, error) {
	if err := ValidateID("assistant id", id); err != nil {
		return nil, err
	}
	if err := validateOp(op); err != nil {
		return nil, err
	}
	fa, err := fieldArgs(fields)
	if err != nil {
		return nil, err
	}
	which, snap := "new", string(doc)
	if version > 0 {
		which, snap = strconv.FormatInt(version, 10), ""
	}
	args := append([]any{op, strconv.FormatInt(rev, 10), which, snap}, fa...)
	v, err := s.run(ctx, "agent_asst_write", []string{s.keys.Assistant(id), s.keys.AssistantVersions(id)}, args...)
	if err != nil {
		return nil, fmt.Errorf("write assistant %s: %w", id, err)
	}
	_, r, err := reply(v)
	if err != nil {
		return nil, fmt.Errorf("write assistant %s: %w", id, err)
	}
	return assistantOf(id, flatHash(r)), nil
}

// DeleteAssistant deletes an assistant and its versions
// (agent_asst_delete.lua); a missing one is ErrNotFound. A retry with the
// same op after a lost reply answers as the first call did.
func (s *Store) DeleteAssistant(ctx context.Context, id, op string) error {
	if err := ValidateID("assistant id", id); err != nil {
		return err
	}
	if err := validateOp(op); err != nil {
		return err
	}
	v, err := s.run(ctx, "agent_asst_delete", []string{s.keys.Assistant(id), s.keys.AssistantVersions(id),
		s.keys.Assistants(ShardOf(id)), s.keys.AssistantGone(id)}, id, op)
	if err != nil {
		return fmt.Errorf("delete assistant %s: %w", id, err)
	}
	if _, _, err := reply(v); err != nil {
		return fmt.Errorf("delete assistant %s: %w", id, err)
	}
	return nil
}
