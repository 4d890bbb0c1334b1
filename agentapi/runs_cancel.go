package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// runsCancelAction reads ?action= (interrupt, the default, or rollback).
func runsCancelAction(r *http.Request) (string, error) {
	a := r.URL.Query().Get("action")
	switch a {
	case "":
		return "interrupt", nil
	case "interrupt", "rollback":
		return a, nil
	}
	return "", runsBadf("action: %q is not one of interrupt, rollback", a)
}

// runsCancelOne cancels one run; one that has ended already is left as it is
// (the reference answers it as cancelled too).
func (s *Server) runsCancelOne(ctx context.Context, rid, action string) error {
	_, err := s.cfg.Client.Cancel(ctx, rid, "cancelled through the Agent Server API (action="+action+")")
	if errors.Is(err, fence.ErrRunDone) {
		return nil
	}
	return err
}

// runsCancel serves POST .../runs/{rid}/cancel?wait=&action=: 202 at
// once, or 204 once the run has ended with wait=1.
func (s *Server) runsCancel(stateless bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		action, err := runsCancelAction(r)
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		wait := false
		switch v := r.URL.Query().Get("wait"); v {
		case "", "0", "false", "False":
		case "1", "true", "True":
			wait = true
		default:
			s.runsFail(w, r, runsBadf("wait: %q: want 0 or 1", v))
			return
		}
		run, _, err := s.runsRead(ctx, r.PathValue("thread_id"), r.PathValue("run_id"))
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		if err := s.runsCancelOne(ctx, run.RunID, action); err != nil {
			s.runsFail(w, r, err)
			return
		}
		if !wait {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if err := s.runsWaitEnd(ctx, run.ThreadID, run.RunID, func() error { return nil }); err != nil {
			s.runsFail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// runsCancelMany serves POST /runs/cancel?action=: the runs of
// {"thread_id", "run_ids"}, or every run of {"status": pending|running|all}
// (of "thread_id" when given). 204; 404 when a named run is not there.
func (s *Server) runsCancelMany(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	action, err := runsCancelAction(r)
	if err != nil {
		s.runsFail(w, r, err)
		return
	}
	data, err := runsReadBody(r)
	if err != nil {
		s.runsFail(w, r, err)
		return
	}
	var body struct {
		ThreadID *string  `json:"thread_id"`
		RunIDs   []string `json:"run_ids"`
		Status   *string  `json:"status"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		s.runsFail(w, r, runsBadf("body: want {\"thread_id\", \"run_ids\"} or {\"status\"}: %v", err))
		return
	}
	tid := ""
	if body.ThreadID != nil {
		tid = *body.ThreadID
	}
	var ids []string
	switch {
	case body.Status != nil:
		st := *body.Status
		if st != "pending" && st != "running" && st != "all" {
			s.runsFail(w, r, runsBadf("status: %q is not one of pending, running, all", st))
			return
		}
		sums, err := s.cfg.Client.ListRuns(ctx, client.ListOptions{Thread: tid, Limit: 10000})
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		for _, sum := range sums {
			if sum.Status != "QUEUED" && sum.Status != "RUNNING" {
				continue
			}
			run, _, err := s.runsRead(ctx, "", sum.ID)
			if err != nil {
				continue // not an API run
			}
			if st == "all" || run.Status == st {
				ids = append(ids, run.RunID)
			}
		}
	case len(body.RunIDs) > 0:
		if tid == "" {
			s.runsFail(w, r, runsBadf("thread_id: required with run_ids"))
			return
		}
		for _, rid := range body.RunIDs {
			if _, _, err := s.runsRead(ctx, tid, rid); err != nil {
				s.runsFail(w, r, err)
				return
			}
		}
		ids = body.RunIDs
	default:
		s.runsFail(w, r, runsBadf("body: give thread_id and run_ids, or status"))
		return
	}
	for _, rid := range ids {
		if err := s.runsCancelOne(ctx, rid, action); err != nil {
			s.runsFail(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// runsBatch serves POST /runs/batch: a list of stateless runs' bodies,
// each created in the background; the runs, in order. Every body is
// checked before any run is created.
func (s *Server) runsBatch(w http.ResponseWriter, r *http.Request) {
	data, err := runsReadBody(r)
	if err != nil {
		s.runsFail(w, r, err)
		return
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil || len(list) == 0 {
		s.runsFail(w, r, runsBadf("body: want a list of at least one run (RunCreate)"))
		return
	}
	bodies := make([]*runBody, len(list))
	for i, f := range list {
		if bodies[i], err = parseRunFields(f); err != nil {
			s.runsFail(w, r, runsBadf("[%d].%v", i, err))
			return
		}
		if _, err := s.runsResolveAssistant(r.Context(), bodies[i].AssistantID); IsNoAssistant(err) {
			s.runsFail(w, r, &runsHTTPError{http.StatusNotFound, "[" + strconv.Itoa(i) + "] No assistant found for " + strconv.Quote(bodies[i].AssistantID)})
			return
		} else if err != nil {
			s.runsFail(w, r, err)
			return
		}
	}
	out := make([]*Run, 0, len(bodies))
	for _, b := range bodies {
		run, err := s.runsSubmit(r.Context(), "", true, b)
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		out = append(out, run)
	}
	writeJSON(w, http.StatusOK, out)
}
