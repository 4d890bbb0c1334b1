package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/batonrun/baton/fence"
)

// threadRoutes registers the routes of this group: a thread's record
// (threads.go), its state and history (threads_state.go).
func (s *Server) threadRoutes() {
	s.mux.HandleFunc("POST /threads", s.createThread)
	s.mux.HandleFunc("POST /threads/search", s.searchThreads)
	s.mux.HandleFunc("POST /threads/count", s.countThreads)
	s.mux.HandleFunc("POST /threads/prune", s.pruneThreads)
	s.mux.HandleFunc("GET /threads/{thread_id}", s.getThread)
	s.mux.HandleFunc("PATCH /threads/{thread_id}", s.patchThread)
	s.mux.HandleFunc("DELETE /threads/{thread_id}", s.deleteThread)
	s.mux.HandleFunc("POST /threads/{thread_id}/copy", s.copyThread)
	s.threadStateRoutes()
}

// threadID reads the path's thread id: a UUID, else 422 as the reference
// answers a malformed id (nothing becomes a key).
func threadID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("thread_id")
	if !isUUID(id) {
		invalid(w, "thread_id", "invalid uuid")
		return "", false
	}
	return id, true
}

func threadNotFound(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("Thread with ID %s not found", id))
}

// storeFailed answers an error of the store or of a graph worker.
func (s *Server) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	// A graph worker's answer carries its status (langgraph.CallError:
	// 404 for a checkpoint it does not have, 422 for bad arguments).
	var coded interface{ StatusCode() int }
	if errors.As(err, &coded) && coded.StatusCode() < 500 {
		writeError(w, coded.StatusCode(), err.Error())
		return
	}
	s.log.Warn("agent api request failed", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, err.Error())
}

// threadDoc renders a thread as the reference does.
func threadDoc(rec *fence.AgentThread, st threadState) map[string]any {
	var values any = nil
	if len(st.Values) > 0 {
		values = st.Values
	}
	interrupts := st.Interrupts
	if interrupts == nil {
		interrupts = map[string][]json.RawMessage{}
	}
	return map[string]any{
		"thread_id":  rec.ID,
		"created_at": timeText(rec.CreatedAt),
		"updated_at": timeText(rec.UpdatedAt),
		"metadata":   json.RawMessage(rec.Metadata),
		"status":     st.Status,
		"config":     map[string]any{},
		"values":     values,
		"interrupts": interrupts,
	}
}

// renderThread reads rec's status and renders it.
func (s *Server) renderThread(ctx context.Context, rec *fence.AgentThread) (map[string]any, error) {
	st, err := s.threadStatus(ctx, rec)
	if err != nil {
		return nil, err
	}
	return threadDoc(rec, st), nil
}

type threadCreate struct {
	ThreadID *string `json:"thread_id"`
	Metadata object  `json:"metadata"`
	IfExists *string `json:"if_exists"`
	// Supersteps are applied to a new thread, one state update each.
	Supersteps []superstep `json:"supersteps"`
}

func (s *Server) createThread(w http.ResponseWriter, r *http.Request) {
	var body threadCreate
	if !bodyInto(w, r, &body) {
		return
	}
	id := newID()
	if body.ThreadID != nil && *body.ThreadID != "" {
		if !isUUID(*body.ThreadID) {
			invalid(w, "thread_id", "invalid uuid")
			return
		}
		id = *body.ThreadID
	}
	ifExists := "raise"
	if body.IfExists != nil {
		if *body.IfExists != "raise" && *body.IfExists != "do_nothing" {
			invalid(w, "if_exists", `must be "raise" or "do_nothing"`)
			return
		}
		ifExists = *body.IfExists
	}
	if !checkSupersteps(w, body.Supersteps) {
		return
	}
	if len(body.Supersteps) > 0 && graphOf(&fence.AgentThread{Metadata: body.Metadata.marshal()}) == "" {
		invalid(w, "metadata.graph_id", "supersteps need the thread's graph")
		return
	}
	rec, created, err := s.cfg.Client.Store().PutAgentThread(r.Context(), id, body.Metadata.marshal(), ifExists, newOp())
	if errors.Is(err, fence.ErrExists) {
		writeError(w, http.StatusConflict, "Thread already exists")
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	if created && len(body.Supersteps) > 0 {
		if err := s.applySupersteps(r.Context(), rec, body.Supersteps); err != nil {
			s.answerUpdateError(w, r, err)
			return
		}
		if rec, err = s.cfg.Client.Store().AgentThread(r.Context(), id); err != nil {
			s.storeFailed(w, r, err)
			return
		}
	}
	doc, err := s.renderThread(r.Context(), rec)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) {
	id, ok := threadID(w, r)
	if !ok {
		return
	}
	rec, err := s.cfg.Client.Store().AgentThread(r.Context(), id)
	if errors.Is(err, fence.ErrNotFound) {
		threadNotFound(w, id)
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	doc, err := s.renderThread(r.Context(), rec)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

func (s *Server) patchThread(w http.ResponseWriter, r *http.Request) {
	id, ok := threadID(w, r)
	if !ok {
		return
	}
	var body struct {
		Metadata *object `json:"metadata"`
	}
	if !bodyInto(w, r, &body) {
		return
	}
	if body.Metadata == nil {
		invalid(w, "metadata", "required")
		return
	}
	rec, err := s.updateThread(r.Context(), id, func(rec *fence.AgentThread) (map[string]string, error) {
		merged, _ := mergeMetadata(rec.Metadata, *body.Metadata)
		// Written even when unchanged: a patch moves updated_at, as the
		// reference's does.
		return map[string]string{"metadata": string(merged)}, nil
	})
	if errors.Is(err, fence.ErrNotFound) {
		threadNotFound(w, id)
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	doc, err := s.renderThread(r.Context(), rec)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// deleteThreadState deletes a thread: its checkpoints first (refused with
// fence.ErrThreadBusy while a run of it is RUNNING, in the script that
// deletes them), then its record. Runs waiting behind the active one
// refuse it too, so none starts on a deleted thread. A failure between the
// two steps leaves a record without state, which a retried delete removes.
func (s *Server) deleteThreadState(ctx context.Context, id string) error {
	store := s.cfg.Client.Store()
	if _, err := store.AgentThread(ctx, id); err != nil {
		return err
	}
	info, err := s.cfg.Client.Thread(ctx, id)
	if err != nil && !errors.Is(err, fence.ErrNotFound) {
		return err
	}
	if err == nil && len(info.Queued) > 0 {
		return fmt.Errorf("thread %s: runs wait: %w", id, fence.ErrThreadBusy)
	}
	if _, err := store.DeleteCheckpoints(ctx, id); err != nil {
		return err
	}
	return store.DeleteAgentThread(ctx, id, newOp())
}

func (s *Server) deleteThread(w http.ResponseWriter, r *http.Request) {
	id, ok := threadID(w, r)
	if !ok {
		return
	}
	err := s.deleteThreadState(r.Context(), id)
	switch {
	case errors.Is(err, fence.ErrNotFound):
		threadNotFound(w, id)
	case errors.Is(err, fence.ErrThreadBusy):
		writeError(w, http.StatusConflict, "Thread is busy")
	case err != nil:
		s.storeFailed(w, r, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// copyThread copies a thread under a new id: its record (metadata) and its
// checkpoints, so the copy's state and history are the source's. Its runs
// stay the source's.
func (s *Server) copyThread(w http.ResponseWriter, r *http.Request) {
	id, ok := threadID(w, r)
	if !ok {
		return
	}
	rec, err := s.cfg.Client.Store().AgentThread(r.Context(), id)
	if errors.Is(err, fence.ErrNotFound) {
		// The reference answers a missing source 409.
		writeError(w, http.StatusConflict, "Thread not found")
		return
	}
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	newID := newID()
	meta := parseObject(rec.Metadata)
	meta["thread_id"], _ = json.Marshal(newID)
	// The checkpoints first: a copy whose record exists is complete.
	if _, err := s.cfg.Client.Store().CopyCheckpoints(r.Context(), id, newID); err != nil {
		s.storeFailed(w, r, err)
		return
	}
	cp, _, err := s.cfg.Client.Store().PutAgentThread(r.Context(), newID, meta.marshal(), "raise", newOp())
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, threadDoc(cp, threadState{Status: threadIdle}))
}
