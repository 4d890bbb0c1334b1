package agentapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/batonrun/baton/fence"
)

// assistantRoutes registers the routes of this group.
func (s *Server) assistantRoutes() {
	s.mux.HandleFunc("POST /assistants", s.createAssistant)
	s.mux.HandleFunc("POST /assistants/search", s.searchAssistants)
	s.mux.HandleFunc("POST /assistants/count", s.countAssistants)
	s.mux.HandleFunc("GET /assistants/{assistant_id}", s.getAssistant)
	s.mux.HandleFunc("PATCH /assistants/{assistant_id}", s.patchAssistant)
	s.mux.HandleFunc("DELETE /assistants/{assistant_id}", s.deleteAssistant)
	s.mux.HandleFunc("POST /assistants/{assistant_id}/versions", s.assistantVersions)
	s.mux.HandleFunc("POST /assistants/{assistant_id}/latest", s.setLatestAssistant)
	s.mux.HandleFunc("GET /assistants/{assistant_id}/graph", s.assistantGraph)
	s.mux.HandleFunc("GET /assistants/{assistant_id}/schemas", s.assistantSchemas)
	s.mux.HandleFunc("GET /assistants/{assistant_id}/subgraphs", s.assistantSubgraphs)
	s.mux.HandleFunc("GET /assistants/{assistant_id}/subgraphs/{namespace}", s.assistantSubgraphs)
}

func assistantNotFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "Assistant not found")
}

// pathAssistant reads the assistant the path names, answering 404 itself.
func (s *Server) pathAssistant(w http.ResponseWriter, r *http.Request) (*fence.Assistant, bool) {
	a, err := s.assistant(r.Context(), r.PathValue("assistant_id"))
	if errors.Is(err, errAssistantUnknown) {
		assistantNotFound(w)
		return nil, false
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return nil, false
	}
	return a, true
}

// assistantBody is create's and patch's body; absent fields are nil.
type assistantBody struct {
	AssistantID *string         `json:"assistant_id"`
	GraphID     *string         `json:"graph_id"`
	Config      *object         `json:"config"`
	Context     json.RawMessage `json:"context"`
	Metadata    *object         `json:"metadata"`
	IfExists    *string         `json:"if_exists"`
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
}

// check validates the body against the project: graph_id must name one of
// its graphs (404 otherwise: nothing would run).
func (s *Server) checkAssistantBody(w http.ResponseWriter, b *assistantBody) bool {
	if b.GraphID != nil && !slices.Contains(s.cfg.Graphs.IDs(), *b.GraphID) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Graph %q not found", *b.GraphID))
		return false
	}
	if b.Config != nil {
		for field, want := range map[string]byte{"tags": '[', "configurable": '{'} {
			if v, ok := (*b.Config)[field]; ok && string(v) != "null" && (len(v) == 0 || v[0] != want) {
				invalid(w, "config."+field, "wrong type")
				return false
			}
		}
		if v, ok := (*b.Config)["recursion_limit"]; ok && string(v) != "null" {
			if _, err := strconv.Atoi(string(v)); err != nil {
				invalid(w, "config.recursion_limit", "expected an integer")
				return false
			}
		}
	}
	return true
}

// fields returns the fields b sets, as JSON texts.
func (b *assistantBody) fields() map[string]string {
	f := map[string]string{}
	str := func(s string) string { v, _ := json.Marshal(s); return string(v) }
	if b.GraphID != nil {
		f["graph_id"] = str(*b.GraphID)
	}
	if b.Config != nil {
		f["config"] = string(b.Config.marshal())
	}
	if len(b.Context) > 0 && string(b.Context) != "null" {
		f["context"] = string(b.Context)
	}
	if b.Name != nil {
		f["name"] = str(*b.Name)
	}
	if b.Description != nil {
		f["description"] = str(*b.Description)
	}
	return f
}

func (s *Server) createAssistant(w http.ResponseWriter, r *http.Request) {
	var body assistantBody
	if !bodyInto(w, r, &body) {
		return
	}
	if body.GraphID == nil {
		invalid(w, "graph_id", "required")
		return
	}
	if !s.checkAssistantBody(w, &body) {
		return
	}
	id := newUUIDv4()
	if body.AssistantID != nil {
		if !isUUID(*body.AssistantID) {
			invalid(w, "assistant_id", "invalid uuid")
			return
		}
		id = *body.AssistantID
	}
	ifExists := "raise"
	if body.IfExists != nil {
		if *body.IfExists != "raise" && *body.IfExists != "do_nothing" {
			invalid(w, "if_exists", `must be "raise" or "do_nothing"`)
			return
		}
		ifExists = *body.IfExists
	}
	if err := s.ensureDefaults(r.Context()); err != nil {
		s.storeFailed(w, r, err)
		return
	}
	fields := map[string]string{"config": "{}", "context": "{}", "metadata": "{}", "description": "null"}
	for k, v := range body.fields() {
		fields[k] = v
	}
	if body.Metadata != nil {
		fields["metadata"] = string(body.Metadata.marshal())
	}
	if body.Name == nil || *body.Name == "" {
		fields["name"] = fields["graph_id"] // the reference's: name || graph_id
	}
	a, _, err := s.cfg.Client.Store().PutAssistant(r.Context(), id, fields, versionDoc(fields), ifExists, newOp())
	if errors.Is(err, fence.ErrExists) {
		writeError(w, http.StatusConflict, "Assistant already exists")
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, assistantDoc(a))
}

func (s *Server) getAssistant(w http.ResponseWriter, r *http.Request) {
	if a, ok := s.pathAssistant(w, r); ok {
		writeJSON(w, http.StatusOK, assistantDoc(a))
	}
}

// patchAssistant changes an assistant and makes the result a new version,
// as the reference does; metadata is merged into the assistant's.
func (s *Server) patchAssistant(w http.ResponseWriter, r *http.Request) {
	a, ok := s.pathAssistant(w, r)
	if !ok {
		return
	}
	var body assistantBody
	if !bodyInto(w, r, &body) || !s.checkAssistantBody(w, &body) {
		return
	}
	a, err := s.writeAssistant(r.Context(), a.ID, func(cur *fence.Assistant) (map[string]string, int64, error) {
		fields := body.fields()
		if body.Metadata != nil {
			merged, _ := mergeMetadata([]byte(orJSON(cur.Fields["metadata"], "{}")), *body.Metadata)
			fields["metadata"] = string(merged)
		}
		return fields, 0, nil
	})
	if errors.Is(err, fence.ErrNotFound) {
		assistantNotFound(w)
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, assistantDoc(a))
}

// deleteAssistant deletes an assistant and its versions; with
// delete_threads=true also the threads whose metadata names it (as DELETE
// /threads/{id} does each; a busy one is kept).
func (s *Server) deleteAssistant(w http.ResponseWriter, r *http.Request) {
	a, ok := s.pathAssistant(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Client.Store().DeleteAssistant(r.Context(), a.ID, newOp()); err != nil {
		if errors.Is(err, fence.ErrNotFound) {
			assistantNotFound(w)
			return
		}
		s.storeFailed(w, r, err)
		return
	}
	if queryBool(r, "delete_threads") {
		sub, _ := json.Marshal(map[string]string{"assistant_id": a.ID})
		list, err := s.matching(r.Context(), threadQuery{Metadata: parseObject(sub)}, "")
		if err != nil {
			s.storeFailed(w, r, err)
			return
		}
		for _, l := range list {
			if err := s.deleteThreadState(r.Context(), l.rec.ID); err != nil &&
				!errors.Is(err, fence.ErrNotFound) && !errors.Is(err, fence.ErrThreadBusy) {
				s.storeFailed(w, r, err)
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, []string{a.ID})
}

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

// graphCall answers a graph worker's answer about the assistant's graph.
func (s *Server) graphCall(w http.ResponseWriter, r *http.Request, op string, args map[string]any) {
	a, ok := s.pathAssistant(w, r)
	if !ok {
		return
	}
	var graph string
	_ = json.Unmarshal([]byte(a.Fields["graph_id"]), &graph)
	args["graph"] = graph
	out, err := s.cfg.Graphs.Call(r.Context(), op, args)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) assistantGraph(w http.ResponseWriter, r *http.Request) {
	args := map[string]any{}
	if x := r.URL.Query().Get("xray"); x != "" {
		if n, err := strconv.Atoi(x); err == nil {
			args["xray"] = n
		} else {
			args["xray"] = queryBool(r, "xray")
		}
	}
	s.graphCall(w, r, "graph", args)
}

func (s *Server) assistantSchemas(w http.ResponseWriter, r *http.Request) {
	s.graphCall(w, r, "schemas", map[string]any{})
}

func (s *Server) assistantSubgraphs(w http.ResponseWriter, r *http.Request) {
	args := map[string]any{"recurse": queryBool(r, "recurse")}
	if ns := r.PathValue("namespace"); ns != "" {
		args["namespace"] = ns
	}
	s.graphCall(w, r, "subgraphs", args)
}
