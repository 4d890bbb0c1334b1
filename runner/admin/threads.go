package admin

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/batonrun/baton/fence"
)

// Paging bounds of GET /v1/threads/{thread}/checkpoints.
const (
	defaultCheckpoints = 20
	maxCheckpoints     = 1000
)

// threadRoutes adds the thread reads to the API's mux: a thread's runs
// and namespaces, and its checkpoints. They are reads: writing a
// checkpoint takes a claim, which only a worker holds.
func (a *api) threadRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/threads/{thread}", a.thread)
	mux.HandleFunc("GET /v1/threads/{thread}/checkpoints", a.checkpoints)
	mux.Handle("/v1/threads/{thread}", methodNotAllowed("GET, HEAD"))
	mux.Handle("/v1/threads/{thread}/checkpoints", methodNotAllowed("GET, HEAD"))
}

func (a *api) thread(w http.ResponseWriter, r *http.Request) {
	info, err := a.client.Thread(r.Context(), r.PathValue("thread"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// CheckpointsBody answers GET /v1/threads/{thread}/checkpoints: the
// checkpoints of one namespace, newest first, each with its data as the
// JSON that was saved. Next, when set, is the cursor of the following
// page.
type CheckpointsBody struct {
	Checkpoints []fence.Checkpoint `json:"checkpoints"`
	Next        string             `json:"next,omitempty"`
}

func (a *api) checkpoints(w http.ResponseWriter, r *http.Request) {
	thread := r.PathValue("thread")
	q := r.URL.Query()
	ns := q.Get("ns")
	if err := fence.ValidateID("thread", thread); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := fence.ValidateNS(ns); err != nil {
		a.fail(w, r, err)
		return
	}
	limit, ok := intParam(w, q.Get("limit"), "limit", defaultCheckpoints, maxCheckpoints)
	if !ok {
		return
	}
	var before int64
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "cursor "+strconv.Quote(c)+": want the next of a previous page")
			return
		}
		before = n
	}
	if !q.Has("ns") {
		// As the CLI: the thread's only namespace; with several, ask.
		names, err := a.client.Namespaces(r.Context(), thread)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		switch {
		case len(names) == 1:
			ns = names[0]
		case len(names) > 1:
			quoted := make([]string, len(names))
			for i, n := range names {
				quoted[i] = strconv.Quote(n)
			}
			writeError(w, http.StatusBadRequest, "ns: thread "+thread+" has checkpoints in "+strconv.Itoa(len(names))+
				" namespaces ("+strings.Join(quoted, ", ")+"): choose one with ns=")
			return
		}
	}
	list, next, err := a.client.Checkpoints(r.Context(), thread, ns, before, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if len(list) == 0 && before == 0 {
		// Nothing in ns: say whether the thread itself is unknown.
		if _, err := a.client.Thread(r.Context(), thread); errors.Is(err, fence.ErrNotFound) {
			a.fail(w, r, err)
			return
		}
	}
	body := CheckpointsBody{Checkpoints: list}
	if body.Checkpoints == nil {
		body.Checkpoints = []fence.Checkpoint{}
	}
	if next > 0 {
		body.Next = strconv.FormatInt(next, 10)
	}
	writeJSON(w, http.StatusOK, body)
}
