package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/batonrun/baton/fence"
)

// maxLimitBody caps a PUT /v1/limits body.
const maxLimitBody = 16 << 10

// limitRoutes adds the fleet-wide limits (docs/flow-control.md): list,
// read, set and delete. Setting one takes effect at the next claim.
func (a *api) limitRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/limits", a.limits)
	mux.HandleFunc("PUT /v1/limits", a.putLimit)
	mux.HandleFunc("GET /v1/limits/{name}", a.limitByName)
	mux.HandleFunc("PUT /v1/limits/{name}", a.putLimit)
	mux.HandleFunc("DELETE /v1/limits/{name}", a.deleteLimit)
	mux.Handle("/v1/limits", methodNotAllowed("GET, HEAD, PUT"))
	mux.Handle("/v1/limits/{name}", methodNotAllowed("GET, HEAD, PUT, DELETE"))
}

// LimitsBody answers GET /v1/limits.
type LimitsBody struct {
	Limits []fence.LimitState `json:"limits"`
}

func (a *api) limits(w http.ResponseWriter, r *http.Request) {
	list, err := a.client.Store().LimitStates(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, LimitsBody{Limits: list})
}

func (a *api) limitByName(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := fence.ValidateLimitName("name", name); err != nil {
		a.fail(w, r, errors.Join(fence.ErrInvalidData, err))
		return
	}
	list, err := a.client.Store().LimitStates(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	for _, l := range list {
		if l.Name == name {
			writeJSON(w, http.StatusOK, l)
			return
		}
	}
	writeError(w, http.StatusNotFound, "no limit "+name+" is set")
}

// putLimit sets a limit from {"name", "concurrency", "rate", "burst"};
// under /v1/limits/{name} the name may be left out, and must match.
func (a *api) putLimit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLimitBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body: "+err.Error())
		return
	}
	var l fence.Limit
	if err := json.Unmarshal(body, &l); err != nil {
		a.fail(w, r, errors.Join(fence.ErrInvalidData, err))
		return
	}
	if name := r.PathValue("name"); name != "" {
		if l.Name != "" && l.Name != name {
			a.fail(w, r, errors.Join(fence.ErrInvalidData, errors.New("name: "+l.Name+" differs from the path's "+name)))
			return
		}
		l.Name = name
	}
	if err := a.client.SetLimit(r.Context(), l); err != nil {
		a.failLimit(w, r, err)
		return
	}
	a.log.Info("limit_set", "limit", l.Name, "remote_addr", r.RemoteAddr)
	writeJSON(w, http.StatusOK, fence.LimitState{Limit: l})
}

func (a *api) deleteLimit(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	found, err := a.client.DeleteLimit(r.Context(), name)
	if err != nil {
		a.failLimit(w, r, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, "no limit "+name+" is set")
		return
	}
	a.log.Info("limit_deleted", "limit", name, "remote_addr", r.RemoteAddr)
	writeJSON(w, http.StatusOK, DeletedLimit{Name: name, Deleted: true})
}

// DeletedLimit answers DELETE /v1/limits/{name}.
type DeletedLimit struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
}

func (a *api) failLimit(w http.ResponseWriter, r *http.Request, err error) {
	a.fail(w, r, err)
}
