package agentapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/batonrun/baton/fence"
)

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
		out = append(out, listed{rec: rec})
	}
	if !needStatus {
		return out, nil
	}
	if err := s.readStatuses(ctx, out); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, l := range out {
		if q.Status != nil && l.st.Status != *q.Status {
			continue
		}
		// As the reference: a thread without values passes a values filter.
		if q.Values != nil && len(l.st.Values) > 0 && !contains(l.st.Values, q.Values.marshal()) {
			continue
		}
		kept = append(kept, l)
	}
	return kept, nil
}

// statusReaders bounds the threads whose status one search reads at once.
const statusReaders = 16

// readStatuses reads the status of each listed thread, statusReaders at a
// time: each read is a few round trips, so a search over many threads is
// bound by Redis, not by their sum.
func (s *Server) readStatuses(ctx context.Context, list []listed) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, statusReaders)
	)
	for i := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := s.threadStatus(ctx, list[i].rec)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			list[i].st = &st
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
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
	if len(list) > 0 && list[0].st == nil {
		if err := s.readStatuses(r.Context(), list); err != nil {
			s.storeFailed(w, r, err)
			return
		}
	}
	out := make([]map[string]any, 0, len(list))
	for _, l := range list {
		out = append(out, selectFields(threadDoc(l.rec, *l.st), body.Select))
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
