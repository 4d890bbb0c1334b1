package agentapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// The cron routes: a cron of the API is a baton schedule (spec.Schedule,
// docs/schedules.md) named by the cron id, whose run is one graph node,
// {"id": "graph", "kind": "graph", "input": {"graph", "assistant_id",
// "input", "config", "context", "metadata", ...}}. Every tick's run is the
// schedule's, with a run id derived from the tick (cron.ID.TICK), so
// however many runners fire a tick it runs once. A thread cron's runs go
// to the thread (its multitask strategy decides when it is busy); a
// stateless cron's run is a thread of its own, as a run without a thread
// is in baton.

// cronRoutes registers the routes of this group.
func (s *Server) cronRoutes() {
	s.mux.HandleFunc("POST /runs/crons", s.createCron)
	s.mux.HandleFunc("POST /threads/{thread_id}/runs/crons", s.createCron)
	s.mux.HandleFunc("POST /runs/crons/search", s.searchCrons)
	s.mux.HandleFunc("POST /runs/crons/count", s.countCrons)
	s.mux.HandleFunc("PATCH /runs/crons/{cron_id}", s.patchCron)
	s.mux.HandleFunc("DELETE /runs/crons/{cron_id}", s.deleteCron)
}

// cronBody is what create and patch read (CronCreate, CronUpdate).
type cronBody struct {
	Schedule        *string         `json:"schedule"`
	AssistantID     *string         `json:"assistant_id"`
	Input           json.RawMessage `json:"input"`
	Metadata        json.RawMessage `json:"metadata"`
	Config          json.RawMessage `json:"config"`
	Context         json.RawMessage `json:"context"`
	InterruptBefore json.RawMessage `json:"interrupt_before"`
	InterruptAfter  json.RawMessage `json:"interrupt_after"`
	StreamMode      json.RawMessage `json:"stream_mode"`
	StreamSubgraphs *bool           `json:"stream_subgraphs"`
	Multitask       *string         `json:"multitask_strategy"`
	Timezone        *string         `json:"timezone"`
	EndTime         json.RawMessage `json:"end_time"`
	Enabled         *bool           `json:"enabled"`
	Webhook         *string         `json:"webhook"`
	OnRunCompleted  *string         `json:"on_run_completed"`
}

// unsupported names a field baton's schedules cannot honour yet, so that
// it is refused rather than ignored.
func (b *cronBody) unsupported() string {
	switch {
	case len(b.EndTime) > 0 && string(b.EndTime) != "null":
		return "end_time: not supported yet (a baton schedule has no end): delete the cron when it should stop"
	case b.Enabled != nil && !*b.Enabled:
		return "enabled: false is not supported yet (a baton schedule is always on): delete the cron, and create it again later"
	case b.Webhook != nil && *b.Webhook != "":
		return "webhook: not supported yet on crons"
	case b.OnRunCompleted != nil && *b.OnRunCompleted != "keep":
		return "on_run_completed: only \"keep\" is supported: a stateless cron's run keeps its thread until baton's retention deletes it"
	}
	return ""
}

// cronInput is the graph node's input: what each tick runs.
type cronInput struct {
	Graph           string          `json:"graph"`
	AssistantID     string          `json:"assistant_id,omitempty"`
	Input           json.RawMessage `json:"input,omitempty"`
	Config          json.RawMessage `json:"config,omitempty"`
	Context         json.RawMessage `json:"context,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	InterruptBefore json.RawMessage `json:"interrupt_before,omitempty"`
	InterruptAfter  json.RawMessage `json:"interrupt_after,omitempty"`
	StreamMode      json.RawMessage `json:"stream_mode,omitempty"`
	Subgraphs       bool            `json:"subgraphs,omitempty"`
	Interrupts      string          `json:"interrupts"`
}

// merge sets what b gives, over in.
func (in *cronInput) merge(b *cronBody) {
	set := func(dst *json.RawMessage, v json.RawMessage) {
		if len(v) > 0 && string(v) != "null" {
			*dst = v
		}
	}
	set(&in.Input, b.Input)
	set(&in.Config, b.Config)
	set(&in.Context, b.Context)
	set(&in.Metadata, b.Metadata)
	set(&in.InterruptBefore, b.InterruptBefore)
	set(&in.InterruptAfter, b.InterruptAfter)
	set(&in.StreamMode, b.StreamMode)
	if b.StreamSubgraphs != nil {
		in.Subgraphs = *b.StreamSubgraphs
	}
}

func (s *Server) createCron(w http.ResponseWriter, r *http.Request) {
	var b cronBody
	if err := storeDecode(r, &b); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if b.Schedule == nil || b.AssistantID == nil {
		writeError(w, http.StatusUnprocessableEntity, "schedule and assistant_id: required")
		return
	}
	if msg := b.unsupported(); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, msg)
		return
	}
	if tid := r.PathValue("thread_id"); tid != "" && !isUUID(tid) {
		writeError(w, http.StatusUnprocessableEntity, "thread_id: must be a UUID")
		return
	}
	a, err := s.ResolveAssistant(r.Context(), *b.AssistantID)
	if IsNoAssistant(err) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Assistant %q not found", *b.AssistantID))
		return
	} else if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	in := cronInput{Graph: a.GraphID, AssistantID: a.ID, Interrupts: "end"}
	in.merge(&b)
	sched := &spec.Schedule{Name: newID(), Cron: *b.Schedule, TZ: cronStr(b.Timezone),
		Thread: r.PathValue("thread_id"), Multitask: cronStr(b.Multitask)}
	s.putCron(w, r, sched, in, http.StatusOK)
}

func cronStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// putCron stores the schedule with in as its run's graph node, and
// answers the cron.
func (s *Server) putCron(w http.ResponseWriter, r *http.Request, sched *spec.Schedule, in cronInput, code int) {
	raw, err := json.Marshal(in)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	sched.Run = &spec.Run{Nodes: []spec.Node{{ID: "graph", Kind: "graph", Input: raw}}}
	st, _, err := s.cfg.Client.PutSchedule(r.Context(), sched)
	if err != nil {
		var se *spec.Error
		if errors.As(err, &se) || errors.Is(err, spec.ErrInvalid) {
			writeError(w, http.StatusUnprocessableEntity, cronFieldNames(err.Error()))
			return
		}
		s.log.ErrorContext(r.Context(), "cron_put_failed", "cron_id", sched.Name, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	cron, _ := cronOf(st)
	writeJSON(w, code, cron)
}

// cronFieldNames words a schedule's problem with the API's field names.
func cronFieldNames(msg string) string {
	return strings.NewReplacer("cron: ", "schedule: ", "tz: ", "timezone: ", "multitask: ", "multitask_strategy: ",
		"thread: ", "thread_id: ").Replace(msg)
}

// cronOf reads a schedule as a cron; ok is false for a schedule that is
// not one (not named by a UUID, or not one graph node).
func cronOf(st client.ScheduleStatus) (map[string]any, bool) {
	if !isUUID(st.Name) || st.Run == nil || len(st.Run.Nodes) != 1 || st.Run.Nodes[0].ID != "graph" || st.Run.Nodes[0].Kind != "graph" {
		return nil, false
	}
	var in cronInput
	if json.Unmarshal(st.Run.Nodes[0].Input, &in) != nil {
		return nil, false
	}
	payload := map[string]any{"assistant_id": in.AssistantID}
	for k, v := range map[string]json.RawMessage{"input": in.Input, "config": in.Config, "context": in.Context,
		"metadata": in.Metadata, "interrupt_before": in.InterruptBefore, "interrupt_after": in.InterruptAfter,
		"stream_mode": in.StreamMode} {
		if len(v) > 0 {
			payload[k] = v
		}
	}
	if in.Subgraphs {
		payload["stream_subgraphs"] = true
	}
	if st.Multitask != "" {
		payload["multitask_strategy"] = st.Multitask
	}
	metadata := json.RawMessage(`{}`)
	if len(in.Metadata) > 0 {
		metadata = in.Metadata
	}
	cron := map[string]any{"cron_id": st.Name, "assistant_id": in.AssistantID, "thread_id": nil,
		"on_run_completed": nil, "end_time": nil, "schedule": st.Cron, "timezone": nil,
		"created_at": storeISO(st.CreatedAt), "updated_at": storeISO(st.UpdatedAt), "payload": payload,
		"user_id": nil, "next_run_date": storeISO(st.Next), "metadata": metadata, "enabled": true}
	if st.Thread != "" {
		cron["thread_id"] = st.Thread
	}
	if st.TZ != "" {
		cron["timezone"] = st.TZ
	}
	return cron, true
}

// cronGet reads one cron; a schedule that is not a cron is not found.
func (s *Server) cronGet(w http.ResponseWriter, r *http.Request, id string) (client.ScheduleStatus, bool) {
	if !isUUID(id) {
		writeError(w, http.StatusUnprocessableEntity, "cron_id: must be a UUID")
		return client.ScheduleStatus{}, false
	}
	st, err := s.cfg.Client.Schedule(r.Context(), id)
	if err == nil {
		if _, ok := cronOf(st); ok {
			return st, true
		}
	} else if !errors.Is(err, fence.ErrNotFound) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return st, false
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("Cron %q not found", id))
	return client.ScheduleStatus{}, false
}

func (s *Server) patchCron(w http.ResponseWriter, r *http.Request) {
	var b cronBody
	if err := storeDecode(r, &b); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if msg := b.unsupported(); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, msg)
		return
	}
	st, ok := s.cronGet(w, r, r.PathValue("cron_id"))
	if !ok {
		return
	}
	var in cronInput
	_ = json.Unmarshal(st.Run.Nodes[0].Input, &in) // cronOf read it
	in.merge(&b)
	sched := st.Schedule
	if b.Schedule != nil {
		sched.Cron = *b.Schedule
	}
	if b.Timezone != nil {
		sched.TZ = *b.Timezone
	}
	if b.Multitask != nil {
		sched.Multitask = *b.Multitask
	}
	s.putCron(w, r, &sched, in, http.StatusOK)
}

func (s *Server) deleteCron(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("cron_id")
	if _, ok := s.cronGet(w, r, id); !ok {
		return
	}
	if err := s.cfg.Client.DeleteSchedule(r.Context(), id); err != nil && !errors.Is(err, fence.ErrNotFound) {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// cronFilter is what search and count read (CronSearch).
type cronFilter struct {
	AssistantID *string        `json:"assistant_id"`
	ThreadID    *string        `json:"thread_id"`
	Enabled     *bool          `json:"enabled"`
	Metadata    map[string]any `json:"metadata"`
	Limit       *int           `json:"limit"`
	Offset      *int           `json:"offset"`
	SortBy      *string        `json:"sort_by"`
	SortOrder   *string        `json:"sort_order"`
	Select      []string       `json:"select"`
}

// cronMatching lists the crons f selects, sorted as it asks.
func (s *Server) cronMatching(w http.ResponseWriter, r *http.Request, f *cronFilter) ([]map[string]any, bool) {
	all, err := s.cfg.Client.Schedules(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return nil, false
	}
	var aid string
	if f.AssistantID != nil {
		if a, err := s.ResolveAssistant(r.Context(), *f.AssistantID); err == nil {
			aid = a.ID
		} else {
			aid = *f.AssistantID
		}
	}
	var out []map[string]any
	for _, st := range all {
		c, ok := cronOf(st)
		if !ok || (f.AssistantID != nil && !strings.EqualFold(c["assistant_id"].(string), aid)) ||
			(f.ThreadID != nil && st.Thread != *f.ThreadID) || (f.Enabled != nil && !*f.Enabled) ||
			!cronMetadataMatches(c["metadata"].(json.RawMessage), f.Metadata) {
			continue
		}
		out = append(out, c)
	}
	by := cmp.Or(cronStr(f.SortBy), "created_at")
	if !slices.Contains([]string{"cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"}, by) {
		writeError(w, http.StatusUnprocessableEntity, "sort_by: "+by+" is not one of cron_id, assistant_id, thread_id, next_run_date, end_time, created_at, updated_at")
		return nil, false
	}
	desc := cronStr(f.SortOrder) != "asc"
	slices.SortStableFunc(out, func(a, b map[string]any) int {
		x, y := fmt.Sprint(a[by]), fmt.Sprint(b[by])
		if desc {
			x, y = y, x
		}
		return cmp.Compare(x, y)
	})
	return out, true
}

func cronMetadataMatches(have json.RawMessage, want map[string]any) bool {
	if len(want) == 0 {
		return true
	}
	var m map[string]any
	if json.Unmarshal(have, &m) != nil {
		return false
	}
	for k, v := range want {
		a, _ := json.Marshal(m[k])
		b, _ := json.Marshal(v)
		if string(a) != string(b) {
			return false
		}
	}
	return true
}

func (s *Server) searchCrons(w http.ResponseWriter, r *http.Request) {
	var f cronFilter
	if err := storeDecode(r, &f); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	limit, offset := 10, 0
	if f.Limit != nil {
		limit = *f.Limit
	}
	if f.Offset != nil {
		offset = *f.Offset
	}
	if limit < 1 || limit > 1000 || offset < 0 {
		writeError(w, http.StatusUnprocessableEntity, "limit: 1 to 1000, offset: at least 0")
		return
	}
	crons, ok := s.cronMatching(w, r, &f)
	if !ok {
		return
	}
	crons = crons[min(offset, len(crons)):min(offset+limit, len(crons))]
	if len(f.Select) > 0 {
		for i, c := range crons {
			picked := map[string]any{}
			for _, k := range f.Select {
				if v, ok := c[k]; ok {
					picked[k] = v
				}
			}
			crons[i] = picked
		}
	}
	writeJSON(w, http.StatusOK, append([]map[string]any{}, crons...))
}

func (s *Server) countCrons(w http.ResponseWriter, r *http.Request) {
	var f cronFilter
	if err := storeDecode(r, &f); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	crons, ok := s.cronMatching(w, r, &f)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, len(crons))
}
