package agentapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

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

// checkAssistantBody validates the body against the project: graph_id must name one of
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
	id := newID()
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
