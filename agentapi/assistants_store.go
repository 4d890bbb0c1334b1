package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/batonrun/baton/fence"
)

// defaults makes sure each graph of the project has its default
// assistant, once per process (again after a failure): created if
// missing, as the reference does at start, and left alone if it exists.
type defaults struct {
	mu   sync.Mutex
	done bool
}

// ensureDefaults creates the missing default assistants.
func (s *Server) ensureDefaults(ctx context.Context) error {
	s.defaults.mu.Lock()
	defer s.defaults.mu.Unlock()
	if s.defaults.done {
		return nil
	}
	for _, g := range s.cfg.Graphs.IDs() {
		name, _ := json.Marshal(g)
		fields := map[string]string{"graph_id": string(name), "name": string(name), "description": "null",
			"config": "{}", "context": "{}", "metadata": `{"created_by":"system"}`}
		if _, _, err := s.cfg.Client.Store().PutAssistant(ctx, DefaultAssistantID(g), fields,
			versionDoc(fields), "do_nothing", "default"); err != nil {
			return err
		}
	}
	s.defaults.done = true
	return nil
}

// versionDoc is a version's stored document: the fields of the assistant.
func versionDoc(fields map[string]string) []byte {
	doc := map[string]json.RawMessage{}
	for k, v := range fields {
		doc[k] = json.RawMessage(v)
	}
	b, _ := json.Marshal(doc)
	return b
}

// errAssistantUnknown: the id names no assistant (or is not an assistant id).
var errAssistantUnknown = errors.New("agentapi: assistant not found")

// resolveAssistantID turns what a request names (an assistant id, or a
// graph id of the project for its default assistant) into an assistant
// id, checked as a UUID before it becomes a key.
func (s *Server) resolveAssistantID(idOrGraph string) (string, error) {
	if slices.Contains(s.cfg.Graphs.IDs(), idOrGraph) {
		return DefaultAssistantID(idOrGraph), nil
	}
	if !isUUID(idOrGraph) {
		return "", errAssistantUnknown
	}
	return idOrGraph, nil
}

// Assistant is an assistant as a run needs it.
type Assistant struct {
	ID       string
	GraphID  string
	Config   json.RawMessage
	Context  json.RawMessage
	Metadata json.RawMessage
}

// assistant reads the assistant that idOrGraph names; errAssistantUnknown when
// there is none.
func (s *Server) assistant(ctx context.Context, idOrGraph string) (*fence.Assistant, error) {
	id, err := s.resolveAssistantID(idOrGraph)
	if err != nil {
		return nil, err
	}
	if err := s.ensureDefaults(ctx); err != nil {
		return nil, err
	}
	a, err := s.cfg.Client.Store().GetAssistant(ctx, id)
	if errors.Is(err, fence.ErrNotFound) {
		return nil, errAssistantUnknown
	}
	return a, err
}

// ResolveAssistant returns the assistant a run names (an assistant id or
// a graph id), with its graph: what the runs routes put in a run's graph
// node. An unknown one is an error that IsNoAssistant matches (404).
func (s *Server) ResolveAssistant(ctx context.Context, idOrGraph string) (*Assistant, error) {
	a, err := s.assistant(ctx, idOrGraph)
	if err != nil {
		return nil, err
	}
	var graph string
	_ = json.Unmarshal([]byte(a.Fields["graph_id"]), &graph)
	return &Assistant{ID: a.ID, GraphID: graph, Config: json.RawMessage(orJSON(a.Fields["config"], "{}")),
		Context: json.RawMessage(orJSON(a.Fields["context"], "{}")), Metadata: json.RawMessage(orJSON(a.Fields["metadata"], "{}"))}, nil
}

// IsNoAssistant reports an unknown assistant.
func IsNoAssistant(err error) bool { return errors.Is(err, errAssistantUnknown) }

func orJSON(v, def string) string {
	if strings.TrimSpace(v) == "" {
		return def
	}
	return v
}

// assistantDoc renders an assistant as the reference does.
func assistantDoc(a *fence.Assistant) map[string]any {
	doc := map[string]any{
		"assistant_id": a.ID,
		"version":      a.Version,
		"created_at":   timeText(a.CreatedAt),
		"updated_at":   timeText(a.UpdatedAt),
	}
	for _, f := range []string{"graph_id", "name", "description", "config", "context", "metadata"} {
		doc[f] = json.RawMessage(orJSON(a.Fields[f], "null"))
	}
	return doc
}

// versionOut renders a stored version as the reference does.
func versionOut(id string, v fence.AssistantVersion) map[string]any {
	doc := map[string]any{}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(v.Doc, &fields)
	for k, raw := range fields {
		doc[k] = raw
	}
	doc["assistant_id"] = id
	doc["version"] = v.Version
	doc["created_at"] = timeText(v.CreatedAt)
	return doc
}

// writeAssistant applies change to an assistant: it reads it, asks change
// for the new fields, and writes them (as a new version when version is
// 0, else making that version current) if the assistant did not change
// meanwhile, else reads again.
func (s *Server) writeAssistant(ctx context.Context, id string,
	change func(a *fence.Assistant) (fields map[string]string, version int64, err error)) (*fence.Assistant, error) {
	store, op := s.cfg.Client.Store(), newOp()
	for try := 0; ; try++ {
		a, err := store.GetAssistant(ctx, id)
		if err != nil {
			return nil, err
		}
		fields, version, err := change(a)
		if err != nil {
			return nil, err
		}
		var doc []byte
		if version == 0 {
			all := map[string]string{}
			for k, v := range a.Fields {
				all[k] = v
			}
			for k, v := range fields {
				all[k] = v
			}
			doc = versionDoc(all)
		}
		a, err = store.WriteAssistant(ctx, id, a.Rev, version, doc, fields, op)
		if errors.Is(err, fence.ErrRecordChanged) && try < maxWriteTries {
			continue
		}
		return a, err
	}
}
