package agentapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/batonrun/baton/fence"
)

// A thread's state and history are the graph's to tell: a graph worker
// reads them with a read-only saver (Graphs.Call "get_state", "history").
// A state update is a baton run on the thread (update_state), so it is
// refused atomically while a run is active, as the reference refuses it.

func (s *Server) threadStateRoutes() {
	s.mux.HandleFunc("GET /threads/{thread_id}/state", s.getState)
	s.mux.HandleFunc("GET /threads/{thread_id}/state/{checkpoint_id}", s.getState)
	s.mux.HandleFunc("POST /threads/{thread_id}/state/checkpoint", s.getStateAt)
	s.mux.HandleFunc("POST /threads/{thread_id}/state", s.updateState)
	s.mux.HandleFunc("GET /threads/{thread_id}/history", s.getHistory)
	s.mux.HandleFunc("POST /threads/{thread_id}/history", s.postHistory)
}

// emptyState is the reference's state of a thread no graph ran on.
var emptyState = json.RawMessage(`{"values":{},"next":[],"tasks":[],"metadata":null,"created_at":null,"checkpoint":null,"parent_checkpoint":null,"interrupts":[]}`)

// threadFor reads the path's thread record, answering 422 or 404 itself.
func (s *Server) threadFor(w http.ResponseWriter, r *http.Request) (*fence.AgentThread, bool) {
	id, ok := threadID(w, r)
	if !ok {
		return nil, false
	}
	rec, err := s.cfg.Client.Store().AgentThread(r.Context(), id)
	if errors.Is(err, fence.ErrNotFound) {
		threadNotFound(w, id)
		return nil, false
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return nil, false
	}
	return rec, true
}

// queryBool reads a boolean query parameter as the reference does.
func queryBool(r *http.Request, name string) bool {
	switch strings.ToLower(r.URL.Query().Get(name)) {
	case "true", "1", "yes":
		return true
	}
	return false
}

// stateArgs are get_state's arguments.
type stateArgs struct {
	Graph        string `json:"graph"`
	Thread       string `json:"thread"`
	CheckpointID string `json:"checkpoint_id,omitempty"`
	CheckpointNS string `json:"checkpoint_ns,omitempty"`
	Subgraphs    bool   `json:"subgraphs,omitempty"`
}

func (s *Server) answerState(w http.ResponseWriter, r *http.Request, rec *fence.AgentThread, args stateArgs) {
	args.Graph, args.Thread = graphOf(rec), rec.ID
	if args.Graph == "" {
		writeJSON(w, http.StatusOK, emptyState)
		return
	}
	out, err := s.cfg.Graphs.Call(r.Context(), "get_state", args)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getState(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.threadFor(w, r)
	if !ok {
		return
	}
	args := stateArgs{Subgraphs: queryBool(r, "subgraphs")}
	if cp := r.PathValue("checkpoint_id"); cp != "" {
		if !isUUID(cp) {
			invalid(w, "checkpoint_id", "invalid uuid")
			return
		}
		args.CheckpointID = cp
	}
	s.answerState(w, r, rec, args)
}

// checkpointRef is the reference's Checkpoint body field.
type checkpointRef struct {
	CheckpointID  *string `json:"checkpoint_id"`
	CheckpointNS  *string `json:"checkpoint_ns"`
	CheckpointMap object  `json:"checkpoint_map"`
}

func (c *checkpointRef) check(w http.ResponseWriter, field string) bool {
	if c != nil && c.CheckpointID != nil && !isUUID(*c.CheckpointID) {
		invalid(w, field+".checkpoint_id", "invalid uuid")
		return false
	}
	return true
}

func (c *checkpointRef) id() string {
	if c == nil || c.CheckpointID == nil {
		return ""
	}
	return *c.CheckpointID
}

func (c *checkpointRef) ns() string {
	if c == nil || c.CheckpointNS == nil {
		return ""
	}
	return *c.CheckpointNS
}

func (s *Server) getStateAt(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.threadFor(w, r)
	if !ok {
		return
	}
	var body struct {
		Subgraphs  *bool          `json:"subgraphs"`
		Checkpoint *checkpointRef `json:"checkpoint"`
	}
	if !bodyInto(w, r, &body) || !body.Checkpoint.check(w, "checkpoint") {
		return
	}
	s.answerState(w, r, rec, stateArgs{Subgraphs: body.Subgraphs != nil && *body.Subgraphs,
		CheckpointID: body.Checkpoint.id(), CheckpointNS: body.Checkpoint.ns()})
}

// historyArgs are history's arguments.
type historyArgs struct {
	Graph      string          `json:"graph"`
	Thread     string          `json:"thread"`
	Limit      int             `json:"limit"`
	Before     string          `json:"before,omitempty"`
	Metadata   object          `json:"metadata,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

func (s *Server) answerHistory(w http.ResponseWriter, r *http.Request, rec *fence.AgentThread, args historyArgs) {
	args.Graph, args.Thread = graphOf(rec), rec.ID
	if args.Graph == "" {
		writeJSON(w, http.StatusOK, []any{})
		return
	}
	out, err := s.cfg.Graphs.Call(r.Context(), "history", args)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getHistory(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.threadFor(w, r)
	if !ok {
		return
	}
	args := historyArgs{Limit: 10, Before: r.URL.Query().Get("before")}
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			invalid(w, "limit", "expected a number")
			return
		}
		args.Limit = n
	}
	s.answerHistory(w, r, rec, args)
}

func (s *Server) postHistory(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.threadFor(w, r)
	if !ok {
		return
	}
	var body struct {
		Limit      *int           `json:"limit"`
		Before     *string        `json:"before"`
		Metadata   object         `json:"metadata"`
		Checkpoint *checkpointRef `json:"checkpoint"`
	}
	if !bodyInto(w, r, &body) || !body.Checkpoint.check(w, "checkpoint") {
		return
	}
	args := historyArgs{Limit: 10, Metadata: body.Metadata}
	if body.Limit != nil {
		args.Limit = *body.Limit
	}
	if body.Before != nil {
		args.Before = *body.Before
	}
	if body.Checkpoint != nil {
		args.Checkpoint, _ = json.Marshal(body.Checkpoint)
	}
	s.answerHistory(w, r, rec, args)
}
