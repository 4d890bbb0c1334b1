package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// runsGet serves GET /threads/{tid}/runs/{rid} and GET /runs/{rid}.
func (s *Server) runsGet(stateless bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		run, _, err := s.runsRead(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id"))
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, run)
	}
}

// runsList serves GET /threads/{tid}/runs?limit=&offset=&status=: the
// thread's runs, newest first. An unknown thread is a 404.
func (s *Server) runsList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tid := r.PathValue("thread_id")
	q := r.URL.Query()
	limit, offset := 10, 0
	for name, dst := range map[string]*int{"limit": &limit, "offset": &offset} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				s.runsFail(w, r, runsBadf("%s: want a whole number, 0 or more", name))
				return
			}
			*dst = n
		}
	}
	status := q.Get("status")
	ok, err := s.runsThreadExists(ctx, tid)
	if err != nil {
		s.runsFail(w, r, err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "Thread "+tid+" not found")
		return
	}
	sums, err := s.cfg.Client.ListRuns(ctx, client.ListOptions{Thread: tid, Limit: 10000})
	if err != nil {
		s.runsFail(w, r, err)
		return
	}
	out := []*Run{}
	skipped := 0
	for _, sum := range sums {
		if len(out) >= limit {
			break
		}
		run, _, err := s.runsRead(ctx, tid, sum.ID)
		if errors.Is(err, errNotAPIRun) {
			continue
		}
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		if status != "" && run.Status != status {
			continue
		}
		if skipped < offset {
			skipped++
			continue
		}
		out = append(out, run)
	}
	writeJSON(w, http.StatusOK, out)
}

// runsDelete serves DELETE /threads/{tid}/runs/{rid} and DELETE
// /runs/{rid}: an ended run is deleted (204); one not ended is refused with
// 409 (cancel it first).
func (s *Server) runsDelete(stateless bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rid := r.PathValue("run_id")
		if _, _, err := s.runsRead(r.Context(), r.PathValue("thread_id"), rid); err != nil {
			s.runsFail(w, r, err)
			return
		}
		_, err := s.cfg.Client.Delete(r.Context(), rid)
		switch {
		case errors.Is(err, fence.ErrRunActive):
			writeError(w, http.StatusConflict, "Run "+rid+" has not ended: cancel it first")
		case errors.Is(err, fence.ErrNotFound):
			writeError(w, http.StatusNotFound, "Run not found")
		case err != nil:
			s.runsFail(w, r, err)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}
}

// runsJoin serves GET .../runs/{rid}/join: once the run has ended, its
// output, as wait answers it.
func (s *Server) runsJoin(stateless bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		run, _, err := s.runsRead(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id"))
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		s.runsServeWait(w, r, run.ThreadID, run.RunID, false, false)
	}
}

// runsJoinStream serves GET .../runs/{rid}/stream: the run's stream after
// Last-Event-ID ("-1" or none: from its start), live until it ends.
func (s *Server) runsJoinStream(stateless bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		after := r.Header.Get("Last-Event-ID")
		if !fence.ValidStreamID(after) {
			s.runsFail(w, r, runsBadf("Last-Event-ID: %q: want a stream id such as 1700000000000-0, or -1 for the start", after))
			return
		}
		if after == "" || after == "-1" {
			after = "0"
		}
		run, _, err := s.runsRead(r.Context(), r.PathValue("thread_id"), r.PathValue("run_id"))
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		cancel := false
		if v := r.URL.Query().Get("cancel_on_disconnect"); v != "" {
			cancel = v == "1" || v == "true" || v == "yes"
		}
		loc := runsLocation(runsPathThread(stateless, run.ThreadID), run.RunID)
		w.Header().Set("Content-Location", loc)
		w.Header().Set("Location", loc+"/stream")
		s.runsServeStream(w, r, run.ThreadID, run.RunID, after, cancel, false)
	}
}

// runsServeWait answers a run's output once it has ended: 200 at once, then a
// newline every second while it runs (the reference's keep-alive; JSON
// allows the whitespace), then the output. cancel and cleanup as for
// runsServeStream.
func (s *Server) runsServeWait(w http.ResponseWriter, r *http.Request, tid, rid string, cancel, cleanup bool) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	out := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.runs.streams.limits.WriteTimeout}
	ctx := r.Context()
	err := s.runsWaitEnd(ctx, tid, rid, func() error {
		out.buf.WriteString("\n")
		return out.flush()
	})
	if err != nil {
		s.runsDisconnected(rid, cancel)
		return
	}
	v, err := s.runsOutput(ctx, tid, rid)
	if err != nil {
		v = map[string]any{"__error__": runsErrorBody{Error: "Error", Message: err.Error()}}
	}
	b, _ := json.Marshal(v)
	out.buf.Write(b)
	out.buf.WriteString("\n")
	_ = out.flush()
	if cleanup {
		s.runsDeleteStateless(rid)
	}
}

// runsWaitEnd returns once run rid has ended, calling tick every second
// meanwhile (an error from it stops the wait). It waits on the run's
// shared reader; when every reader's place is taken, on baton's own wait.
func (s *Server) runsWaitEnd(ctx context.Context, tid, rid string, tick func() error) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	hub := s.runs.streams.hub
	if f, ok := hub.Join(tid, rid); ok {
		defer hub.Leave(f)
		for {
			ended, wake := f.Ended()
			if ended {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-wake:
			case <-t.C:
				if err := tick(); err != nil {
					return err
				}
			}
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.cfg.Client.Wait(ctx, rid)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if err := tick(); err != nil {
				return err
			}
		}
	}
}

// runsOutput is what wait and join answer for an ended run, as the
// reference does: the run's last state values (with "__interrupt__" when it
// stopped at an interrupt), {"__error__": {error, message}} for a failed
// run, and for a cancelled one the last values its stream carried (null
// when none).
func (s *Server) runsOutput(ctx context.Context, tid, rid string) (any, error) {
	info, err := s.cfg.Client.Store().GetRun(ctx, rid)
	if err != nil {
		return nil, err
	}
	n := info.Nodes[0]
	switch info.Status {
	case "SUCCEEDED":
		return runsValuesOf(n.Result), nil
	case "FAILED":
		return map[string]any{"__error__": runsErrorOf(n.Error)}, nil
	}
	var last json.RawMessage
	after := "0"
	for {
		es, err := s.cfg.Client.Store().ReadStreamOf(ctx, tid, rid, after, 512, 0)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.Event == "values" {
				last = e.Data
			}
		}
		if len(es) < 512 {
			break
		}
		after = es[len(es)-1].ID
	}
	if last == nil {
		return nil, nil
	}
	return last, nil
}

// runsValuesOf reads a graph node's result: {"values", "interrupts"} (the
// API's graph runs) gives the values, with "__interrupt__" when there are
// interrupts, as the reference's last values event carries them; any other
// result is the state itself (a graph node run without the API's fields).
func runsValuesOf(result json.RawMessage) any {
	var r struct {
		Values     json.RawMessage `json:"values"`
		Interrupts json.RawMessage `json:"interrupts"`
	}
	if json.Unmarshal(result, &r) != nil || r.Values == nil || r.Interrupts == nil {
		return result
	}
	var list []json.RawMessage
	if json.Unmarshal(r.Interrupts, &list) != nil || len(list) == 0 {
		return r.Values
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Values, &m) != nil {
		return r.Values
	}
	m["__interrupt__"] = r.Interrupts
	return m
}

// runsDeleteStateless deletes a stateless run that ended and its thread's
// checkpoints (on_completion=delete, the reference's default for them).
func (s *Server) runsDeleteStateless(rid string) {
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	store := s.cfg.Client.Store()
	tid, err := store.Locate(ctx, rid)
	if err != nil {
		return
	}
	if _, err := s.cfg.Client.Delete(ctx, rid); err != nil {
		s.log.Warn("agentapi_stateless_delete_failed", "run_id", rid, "err", err)
		return
	}
	if _, err := store.DeleteCheckpoints(ctx, tid); err != nil && !errors.Is(err, fence.ErrNotFound) {
		s.log.Warn("agentapi_stateless_delete_failed", "run_id", rid, "err", err)
	}
}
