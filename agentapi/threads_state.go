package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
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

// stateUpdate is the graph node's update_state input.
type stateUpdate struct {
	Values       json.RawMessage `json:"values"`
	AsNode       string          `json:"as_node,omitempty"`
	CheckpointID string          `json:"checkpoint_id,omitempty"`
	CheckpointNS string          `json:"checkpoint_ns,omitempty"`
}

// updateState runs the graph's update_state as a baton run of the thread
// with multitask reject: refused (409) in the same atomic step that would
// store it while another run is active or queued. It waits for the run and
// answers the reference's {"checkpoint": {...}}.
func (s *Server) updateState(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.threadFor(w, r)
	if !ok {
		return
	}
	var body struct {
		Values       json.RawMessage `json:"values"`
		AsNode       *string         `json:"as_node"`
		CheckpointID *string         `json:"checkpoint_id"`
		Checkpoint   *checkpointRef  `json:"checkpoint"`
	}
	if !bodyInto(w, r, &body) || !body.Checkpoint.check(w, "checkpoint") {
		return
	}
	if v := strings.TrimSpace(string(body.Values)); v != "" && v != "null" && v[0] != '{' && v[0] != '[' {
		invalid(w, "values", "expected an object or an array of objects")
		return
	}
	graph := graphOf(rec)
	if graph == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Thread %s has no graph ID", rec.ID))
		return
	}
	up := stateUpdate{Values: body.Values, CheckpointID: body.Checkpoint.id(), CheckpointNS: body.Checkpoint.ns()}
	if len(up.Values) == 0 {
		up.Values = json.RawMessage("null")
	}
	if body.CheckpointID != nil && *body.CheckpointID != "" {
		up.CheckpointID = *body.CheckpointID
	}
	if body.AsNode != nil {
		up.AsNode = *body.AsNode
		if missing, err := s.lacksNode(r.Context(), graph, up.AsNode); err == nil && missing {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Node %s does not exist", up.AsNode))
			return
		}
	}
	before, err := s.threadStatus(r.Context(), rec)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	input, _ := json.Marshal(map[string]any{"graph": graph, "update_state": up})
	runID := newUUIDv4()
	_, err = s.cfg.Client.Submit(r.Context(), &spec.Run{ID: runID, Thread: rec.ID, Multitask: "reject",
		Nodes: []spec.Node{{ID: "graph", Kind: "graph", Input: input, MaxAttempts: 1}}})
	if errors.Is(err, fence.ErrThreadBusy) {
		writeError(w, http.StatusConflict, "Thread is busy")
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	run, err := s.cfg.Client.Wait(r.Context(), runID)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	after := before
	var res graphResult
	node := graphNode(run)
	ok = run.Status == string(client.Succeeded) && node != nil && json.Unmarshal(node.Result, &res) == nil
	if ok {
		after.Values = s.valuesNow(r.Context(), graph, rec.ID, before.Values)
	}
	// The update's run must not stand for the thread's status: its record
	// remembers the status it had, with the new values.
	snap, _ := json.Marshal(after)
	if _, err := s.updateThread(r.Context(), rec.ID, func(*fence.AgentThread) (map[string]string, error) {
		return map[string]string{"snap_run": runID, "snap": string(snap)}, nil
	}); err != nil {
		s.storeFailed(w, r, err)
		return
	}
	if !ok {
		msg := "state update failed"
		if node != nil && node.Error != "" {
			msg = node.Error
		}
		code := http.StatusInternalServerError
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "InvalidUpdateError") {
			code = http.StatusBadRequest
		}
		writeError(w, code, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"checkpoint": res.Checkpoint})
}

// lacksNode reports whether graph has no node as_node (LangGraph's own
// "__start__", "__input__" and the like always pass), asking the graph
// worker for the graph's drawing.
func (s *Server) lacksNode(ctx context.Context, graph, asNode string) (bool, error) {
	if strings.HasPrefix(asNode, "__") {
		return false, nil
	}
	raw, err := s.cfg.Graphs.Call(ctx, "graph", map[string]any{"graph": graph})
	if err != nil {
		return false, err
	}
	var g struct {
		Nodes []struct {
			ID json.RawMessage `json:"id"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &g); err != nil || len(g.Nodes) == 0 {
		return false, errors.New("graph drawing without nodes")
	}
	for _, n := range g.Nodes {
		var id string
		if json.Unmarshal(n.ID, &id) == nil && id == asNode {
			return false, nil
		}
	}
	return true, nil
}

// valuesNow reads the thread's state values now, or keeps old when the
// graph worker cannot tell.
func (s *Server) valuesNow(ctx context.Context, graph, thread string, old json.RawMessage) json.RawMessage {
	raw, err := s.cfg.Graphs.Call(ctx, "get_state", stateArgs{Graph: graph, Thread: thread})
	if err != nil {
		return old
	}
	var st struct {
		Values json.RawMessage `json:"values"`
	}
	if json.Unmarshal(raw, &st) != nil || len(st.Values) == 0 {
		return old
	}
	return st.Values
}
