package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

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
	id := newUUIDv4()
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
// fence.ErrThreadBusy while a run of it is RUNNING), then its record. A
// failure between the two leaves a record without state, which a retried
// delete removes.
func (s *Server) deleteThreadState(ctx context.Context, id string) error {
	store := s.cfg.Client.Store()
	if _, err := store.AgentThread(ctx, id); err != nil {
		return err
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
	newID := newUUIDv4()
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

// threadQuery is the filter of search and count.
type threadQuery struct {
	Metadata object   `json:"metadata"`
	Values   object   `json:"values"`
	Status   *string  `json:"status"`
	IDs      []string `json:"ids"`
}

func (q *threadQuery) check(w http.ResponseWriter) bool {
	if q.Status != nil && !slices.Contains([]string{threadIdle, threadBusy, threadInterrupted, threadError}, *q.Status) {
		invalid(w, "status", "must be one of idle, busy, interrupted, error")
		return false
	}
	for i, id := range q.IDs {
		if !isUUID(id) {
			invalid(w, fmt.Sprintf("ids[%d]", i), "invalid uuid")
			return false
		}
	}
	return true
}

// listed is a thread with its status, when read.
type listed struct {
	rec *fence.AgentThread
	st  *threadState
}

// matching returns the threads q selects; their status is read when q
// or sortBy needs it.
func (s *Server) matching(ctx context.Context, q threadQuery, sortBy string) ([]listed, error) {
	store := s.cfg.Client.Store()
	ids := q.IDs
	if len(ids) == 0 {
		var err error
		if ids, err = store.AgentThreadIDs(ctx); err != nil {
			return nil, err
		}
	}
	recs, err := store.AgentThreads(ctx, ids)
	if err != nil {
		return nil, err
	}
	needStatus := q.Status != nil || q.Values != nil || sortBy == "status"
	var out []listed
	for _, rec := range recs {
		if q.Metadata != nil && !contains(rec.Metadata, q.Metadata.marshal()) {
			continue
		}
		l := listed{rec: rec}
		if needStatus {
			st, err := s.threadStatus(ctx, rec)
			if err != nil {
				return nil, err
			}
			l.st = &st
			if q.Status != nil && st.Status != *q.Status {
				continue
			}
			// As the reference: a thread without values passes a values
			// filter.
			if q.Values != nil && len(st.Values) > 0 && !contains(st.Values, q.Values.marshal()) {
				continue
			}
		}
		out = append(out, l)
	}
	return out, nil
}

func (s *Server) searchThreads(w http.ResponseWriter, r *http.Request) {
	var body struct {
		threadQuery
		Limit     *int     `json:"limit"`
		Offset    *int     `json:"offset"`
		SortBy    *string  `json:"sort_by"`
		SortOrder *string  `json:"sort_order"`
		Select    []string `json:"select"`
	}
	if !bodyInto(w, r, &body) || !body.check(w) {
		return
	}
	limit, offset, ok := page(w, body.Limit, body.Offset)
	if !ok {
		return
	}
	sortBy, order := "created_at", "desc"
	if body.SortBy != nil {
		if !slices.Contains([]string{"thread_id", "status", "created_at", "updated_at"}, *body.SortBy) {
			invalid(w, "sort_by", "must be one of thread_id, status, created_at, updated_at")
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
	list, err := s.matching(r.Context(), body.threadQuery, sortBy)
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	slices.SortStableFunc(list, func(a, b listed) int {
		var c int
		switch sortBy {
		case "created_at":
			c = a.rec.CreatedAt.Compare(b.rec.CreatedAt)
		case "updated_at":
			c = a.rec.UpdatedAt.Compare(b.rec.UpdatedAt)
		case "thread_id":
			c = strings.Compare(a.rec.ID, b.rec.ID)
		case "status":
			c = strings.Compare(a.st.Status, b.st.Status)
		}
		if order == "desc" {
			c = -c
		}
		return c
	})
	list = list[min(offset, len(list)):]
	list = list[:min(limit, len(list))]
	out := make([]map[string]any, 0, len(list))
	for _, l := range list {
		st := l.st
		if st == nil {
			got, err := s.threadStatus(r.Context(), l.rec)
			if err != nil {
				s.storeFailed(w, r, err)
				return
			}
			st = &got
		}
		out = append(out, selectFields(threadDoc(l.rec, *st), body.Select))
	}
	paginate(w, offset, limit, len(out))
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) countThreads(w http.ResponseWriter, r *http.Request) {
	var body threadQuery
	if !bodyInto(w, r, &body) || !body.check(w) {
		return
	}
	body.IDs = nil // count has no ids filter
	list, err := s.matching(r.Context(), body, "")
	if err != nil {
		s.storeFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, len(list))
}

// pruneThreads prunes threads by id: strategy "delete" (the default)
// deletes each as DELETE does; "keep_latest" keeps each thread and its
// newest checkpoint of every namespace, dropping its history. Missing and
// busy threads are skipped.
func (s *Server) pruneThreads(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ThreadIDs []string `json:"thread_ids"`
		Strategy  *string  `json:"strategy"`
	}
	if !bodyInto(w, r, &body) {
		return
	}
	strategy := "delete"
	if body.Strategy != nil {
		if *body.Strategy != "delete" && *body.Strategy != "keep_latest" {
			invalid(w, "strategy", `must be "delete" or "keep_latest"`)
			return
		}
		strategy = *body.Strategy
	}
	for i, id := range body.ThreadIDs {
		if !isUUID(id) {
			invalid(w, fmt.Sprintf("thread_ids[%d]", i), "invalid uuid")
			return
		}
	}
	store := s.cfg.Client.Store()
	n := 0
	for _, id := range body.ThreadIDs {
		var err error
		if strategy == "delete" {
			err = s.deleteThreadState(r.Context(), id)
		} else if _, err = store.AgentThread(r.Context(), id); err == nil {
			_, err = store.KeepLatestCheckpoints(r.Context(), id)
		}
		switch {
		case err == nil:
			n++
		case errors.Is(err, fence.ErrNotFound), errors.Is(err, fence.ErrThreadBusy):
		default:
			s.storeFailed(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]int{"pruned_count": n})
}
