package agentapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/batonrun/baton/fence"
)

// assistantQuery is search's and count's filter.
type assistantQuery struct {
	Metadata object  `json:"metadata"`
	GraphID  *string `json:"graph_id"`
	Name     *string `json:"name"`
}

func (q assistantQuery) match(a *fence.Assistant) bool {
	if q.GraphID != nil {
		var g string
		if json.Unmarshal([]byte(a.Fields["graph_id"]), &g) != nil || g != *q.GraphID {
			return false
		}
	}
	if q.Name != nil {
		var n string
		_ = json.Unmarshal([]byte(a.Fields["name"]), &n)
		if !strings.Contains(strings.ToLower(n), strings.ToLower(*q.Name)) {
			return false
		}
	}
	if q.Metadata != nil && !contains(json.RawMessage(orJSON(a.Fields["metadata"], "{}")), q.Metadata.marshal()) {
		return false
	}
	return true
}

func (s *Server) matchingAssistants(w http.ResponseWriter, r *http.Request, q assistantQuery) ([]*fence.Assistant, bool) {
	if err := s.ensureDefaults(r.Context()); err != nil {
		s.storeFailed(w, r, err)
		return nil, false
	}
	store := s.cfg.Client.Store()
	ids, err := store.AssistantIDs(r.Context())
	if err != nil {
		s.storeFailed(w, r, err)
		return nil, false
	}
	all, err := store.GetAssistants(r.Context(), ids)
	if err != nil {
		s.storeFailed(w, r, err)
		return nil, false
	}
	out := all[:0]
	for _, a := range all {
		if q.match(a) {
			out = append(out, a)
		}
	}
	return out, true
}

func (s *Server) searchAssistants(w http.ResponseWriter, r *http.Request) {
	var body struct {
		assistantQuery
		Limit     *int     `json:"limit"`
		Offset    *int     `json:"offset"`
		SortBy    *string  `json:"sort_by"`
		SortOrder *string  `json:"sort_order"`
		Select    []string `json:"select"`
	}
	if !bodyInto(w, r, &body) {
		return
	}
	limit, offset, ok := page(w, body.Limit, body.Offset)
	if !ok {
		return
	}
	sortBy, order := "created_at", "desc"
	if body.SortBy != nil {
		if !slices.Contains([]string{"assistant_id", "graph_id", "created_at", "updated_at", "name"}, *body.SortBy) {
			invalid(w, "sort_by", "must be one of assistant_id, graph_id, created_at, updated_at, name")
			return
		}
		sortBy = *body.SortBy
	}
	if body.SortOrder != nil {
		if *body.SortOrder != "asc" && *body.SortOrder != "desc" {
			invalid(w, "sort_order", `must be "asc" or "desc"`)
			return
		}
		order = *body.SortOrder
	}
	list, ok := s.matchingAssistants(w, r, body.assistantQuery)
	if !ok {
		return
	}
	slices.SortStableFunc(list, func(a, b *fence.Assistant) int {
		var c int
		switch sortBy {
		case "created_at":
			c = a.CreatedAt.Compare(b.CreatedAt)
		case "updated_at":
			c = a.UpdatedAt.Compare(b.UpdatedAt)
		case "assistant_id":
			c = strings.Compare(a.ID, b.ID)
		default:
			c = strings.Compare(a.Fields[sortBy], b.Fields[sortBy])
		}
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if order == "desc" {
			c = -c
		}
		return c
	})
	list = list[min(offset, len(list)):]
	list = list[:min(limit, len(list))]
	out := make([]map[string]any, 0, len(list))
	for _, a := range list {
		out = append(out, selectFields(assistantDoc(a), body.Select))
	}
	paginate(w, offset, limit, len(out))
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) countAssistants(w http.ResponseWriter, r *http.Request) {
	var body assistantQuery
	if !bodyInto(w, r, &body) {
		return
	}
	if list, ok := s.matchingAssistants(w, r, body); ok {
		writeJSON(w, http.StatusOK, len(list))
	}
}

// assistantVersions lists an assistant's versions, newest first.
func (s *Server) assistantVersions(w http.ResponseWriter, r *http.Request) {
	a, ok := s.pathAssistant(w, r)
	if !ok {
		return
	}
	var body struct {
		Limit    *int   `json:"limit"`
		Offset   *int   `json:"offset"`
		Metadata object `json:"metadata"`
	}
	if !bodyInto(w, r, &body) {
		return
	}
	limit, offset, ok := page(w, body.Limit, body.Offset)
	if !ok {
		return
	}
	vs, err := s.cfg.Client.Store().AssistantVersions(r.Context(), a.ID)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	out := []map[string]any{}
	for _, v := range vs {
		doc := versionOut(a.ID, v)
		if body.Metadata != nil {
			meta, _ := doc["metadata"].(json.RawMessage)
			if !contains(meta, body.Metadata.marshal()) {
				continue
			}
		}
		out = append(out, doc)
	}
	out = out[min(offset, len(out)):]
	out = out[:min(limit, len(out))]
	if len(out) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Assistant %q not found.", a.ID))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// setLatestAssistant makes an existing version the assistant's current
// one, without adding a version.
func (s *Server) setLatestAssistant(w http.ResponseWriter, r *http.Request) {
	a, ok := s.pathAssistant(w, r)
	if !ok {
		return
	}
	var body struct {
		Version *float64 `json:"version"`
	}
	if !bodyInto(w, r, &body) {
		return
	}
	if body.Version == nil {
		invalid(w, "version", "required")
		return
	}
	n := int64(*body.Version)
	if float64(n) != *body.Version || n < 1 {
		writeError(w, http.StatusNotFound, "Assistant version not found")
		return
	}
	a, err := s.writeAssistant(r.Context(), a.ID, func(cur *fence.Assistant) (map[string]string, int64, error) {
		vs, err := s.cfg.Client.Store().AssistantVersions(r.Context(), cur.ID)
		if err != nil {
			return nil, 0, err
		}
		for _, v := range vs {
			if v.Version == n {
				var doc map[string]json.RawMessage
				_ = json.Unmarshal(v.Doc, &doc)
				fields := map[string]string{}
				for k, raw := range doc {
					fields[k] = string(raw)
				}
				return fields, n, nil
			}
		}
		return nil, 0, fence.ErrNoVersion
	})
	switch {
	case errors.Is(err, fence.ErrNoVersion):
		writeError(w, http.StatusNotFound, "Assistant version not found")
	case errors.Is(err, fence.ErrNotFound):
		assistantNotFound(w)
	case err != nil:
		s.storeFailed(w, r, err)
	default:
		writeJSON(w, http.StatusOK, assistantDoc(a))
	}
}
