package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/spec"
)

// maxScheduleBody caps a PUT /v1/schedules/{name} body: a run spec and a
// few fields.
const maxScheduleBody = 2 << 20

// scheduleRoutes adds the cron schedules (docs/schedules.md): list, read,
// store or replace, delete.
func (a *api) scheduleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/schedules", a.schedules)
	mux.HandleFunc("GET /v1/schedules/{name}", a.scheduleByName)
	mux.HandleFunc("PUT /v1/schedules/{name}", a.putSchedule)
	mux.HandleFunc("DELETE /v1/schedules/{name}", a.deleteSchedule)
	mux.Handle("/v1/schedules", methodNotAllowed("GET, HEAD"))
	mux.Handle("/v1/schedules/{name}", methodNotAllowed("GET, HEAD, PUT, DELETE"))
}

// SchedulesBody answers GET /v1/schedules.
type SchedulesBody struct {
	Schedules []client.ScheduleStatus `json:"schedules"`
}

func (a *api) schedules(w http.ResponseWriter, r *http.Request) {
	list, err := a.client.Schedules(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, SchedulesBody{Schedules: list})
}

func (a *api) scheduleByName(w http.ResponseWriter, r *http.Request) {
	st, err := a.client.Schedule(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// scheduleRequest is PUT /v1/schedules/{name}'s body; the run spec is read
// by package spec, strictly, so its problems name their fields.
type scheduleRequest struct {
	Cron      string          `json:"cron"`
	TZ        string          `json:"tz"`
	Missed    string          `json:"missed"`
	Thread    string          `json:"thread"`
	Multitask string          `json:"multitask"`
	Run       json.RawMessage `json:"run"`
}

// putSchedule stores or replaces the schedule of the path's name and
// answers it as stored (200; the same definition again changes nothing).
func (a *api) putSchedule(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxScheduleBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body: "+err.Error())
		return
	}
	var req scheduleRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		a.fail(w, r, &spec.Error{Field: "schedule", Msg: err.Error()})
		return
	}
	s := &spec.Schedule{Name: r.PathValue("name"), Cron: req.Cron, TZ: req.TZ, Missed: req.Missed,
		Thread: req.Thread, Multitask: req.Multitask}
	if len(req.Run) > 0 && string(req.Run) != "null" {
		run, err := spec.ParseAs(req.Run, spec.JSON)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		s.Run = run
	}
	st, changed, err := a.client.PutSchedule(r.Context(), s)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if changed {
		a.log.Info("schedule_put", "schedule", s.Name, "cron", s.Cron, "remote_addr", r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, st)
}

func (a *api) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := a.client.DeleteSchedule(r.Context(), name); err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("schedule_deleted", "schedule", name, "remote_addr", r.RemoteAddr)
	writeJSON(w, http.StatusOK, DeletedSchedule{Name: name, Deleted: true})
}

// DeletedSchedule answers DELETE /v1/schedules/{name}.
type DeletedSchedule struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}
