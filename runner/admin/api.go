package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/runfeed"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/tracing"
)

// Paging bounds of the list routes.
const (
	defaultEvents = 1000
	maxEvents     = 10000
	defaultRuns   = 50
	maxRuns       = 1000
	maxReason     = 1024
	maxCancelBody = 64 << 10
	// maxResumeBody: a resume value is capped as a node's input (1 MiB by
	// default, runner.Limits), plus room for the wrapping.
	maxResumeBody = 1<<20 + 4<<10
)

// api serves /v1/: the run API over a runner.Client.
type api struct {
	client  *runner.Client
	maxBody int64
	log     *slog.Logger
	// live event streams (follow.go)
	followers    *followers
	followMaxAge time.Duration
	clientOf     func(*http.Request) string // proxies.client
	feeds        *runfeed.Hub               // run streams (stream.go)
	streamers    *followers                 // run streams' clients (stream.go)
}

func (a *api) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", a.submit)
	mux.HandleFunc("GET /v1/runs", a.list)
	mux.HandleFunc("GET /v1/runs/{id}", a.status)
	mux.HandleFunc("GET /v1/runs/{id}/events", a.events)
	mux.HandleFunc("GET /v1/runs/{id}/stream", a.stream) // stream.go
	mux.HandleFunc("DELETE /v1/runs/{id}", a.deleteRun)
	mux.HandleFunc("POST /v1/runs/{id}/cancel", a.cancel)
	mux.HandleFunc("POST /v1/runs/{id}/retry", a.retry)
	mux.HandleFunc("POST /v1/runs/{id}/nodes/{node}/resume", a.resume)
	mux.HandleFunc("GET /v1/workers", a.workers)
	// Without these, ServeMux would answer a wrong method or path in plain
	// text; API clients get JSON.
	mux.Handle("/v1/runs", methodNotAllowed("GET, HEAD, POST"))
	mux.Handle("/v1/runs/{id}", methodNotAllowed("GET, HEAD, DELETE"))
	mux.Handle("/v1/runs/{id}/events", methodNotAllowed("GET, HEAD"))
	mux.Handle("/v1/runs/{id}/stream", methodNotAllowed("GET, HEAD"))
	mux.Handle("/v1/runs/{id}/cancel", methodNotAllowed("POST"))
	mux.Handle("/v1/runs/{id}/retry", methodNotAllowed("POST"))
	mux.Handle("/v1/runs/{id}/nodes/{node}/resume", methodNotAllowed("POST"))
	mux.Handle("/v1/workers", methodNotAllowed("GET, HEAD"))
	a.threadRoutes(mux)   // threads.go
	a.limitRoutes(mux)    // limits.go
	a.scheduleRoutes(mux) // schedules.go
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no route "+r.URL.Path)
	})
	return mux
}

func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed; allowed: "+allow)
	})
}

// Problem is one wrong field of a refused run spec.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ErrorBody is every error response of /v1/.
type ErrorBody struct {
	Error    string    `json:"error"`
	Problems []Problem `json:"problems,omitempty"`
}

// SubmitBody answers POST /v1/runs: runner.Submitted, and Warning when the
// run was stored but some of its nodes could not be enqueued (the sweeper
// delivers them).
type SubmitBody struct {
	runner.Submitted
	Warning string `json:"warning,omitempty"`
}

func (a *api) submit(w http.ResponseWriter, r *http.Request) {
	// require_served=true refuses (400, storing nothing) a run with a node
	// no live runner serves, as enqueue submit --require-served does.
	submit := a.client.Submit
	switch v := r.URL.Query().Get("require_served"); v {
	case "", "false", "0":
	case "true", "1":
		submit = a.client.SubmitServed
	default:
		writeError(w, http.StatusBadRequest, "require_served "+strconv.Quote(v)+": want true or false")
		return
	}
	// A spec's cap is the client's (MAX_SPEC_BYTES), the one the CLI and
	// the Go client apply, not the cap of other bodies.
	lim := a.client.SpecLimits()
	if err := lim.CheckSize(r.ContentLength); r.ContentLength > 0 && err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(lim.MaxSpecBytes)))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, lim.CheckSize(-1).Error())
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return
	}
	// The content type, when it names JSON or YAML, decides the format:
	// invalid JSON sent as JSON is never read again as YAML.
	spec, err := runner.ParseSpecAs(body, runner.SpecFormatOf(r.Header.Get("Content-Type")))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// A caller's traceparent header makes the run part of its trace; a
	// malformed one is logged and the run traced on its own.
	ctx, ok := tracing.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if !ok {
		a.log.Warn("traceparent_ignored", "traceparent", r.Header.Get("traceparent"), "reason", "not a W3C traceparent")
	}
	out, err := submit(ctx, spec)
	if err != nil && out.RunID == "" {
		a.fail(w, r, err)
		return
	}
	resp := SubmitBody{Submitted: out}
	if err != nil {
		// Stored, but an enqueue failed: the run exists and will run.
		a.log.Warn("submit_enqueue_failed", "run_id", out.RunID, "err", err)
		resp.Warning = err.Error()
	}
	code := http.StatusOK
	if out.Created {
		code = http.StatusCreated
	}
	w.Header().Set("Location", "/v1/runs/"+out.RunID)
	writeJSON(w, code, resp)
}

// WorkersBody answers GET /v1/workers: the live runners, with the kinds
// and queues each serves.
type WorkersBody struct {
	Workers []fence.WorkerInfo `json:"workers"`
}

func (a *api) workers(w http.ResponseWriter, r *http.Request) {
	list, err := a.client.Workers(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, WorkersBody{Workers: list})
}

func (a *api) status(w http.ResponseWriter, r *http.Request) {
	info, err := a.client.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

// EventsBody answers GET /v1/runs/{id}/events. Next is the id of the last
// event returned (or the after given, when none was): pass it as after to
// read on.
type EventsBody struct {
	Events []fence.Event `json:"events"`
	Next   string        `json:"next,omitempty"`
}

var streamID = regexp.MustCompile(`^[0-9]{1,20}(-[0-9]{1,20})?$`)

func (a *api) events(w http.ResponseWriter, r *http.Request) {
	if wantsFollow(r) {
		a.follow(w, r) // Server-Sent Events, follow.go
		return
	}
	q := r.URL.Query()
	after := q.Get("after")
	if after != "" && !streamID.MatchString(after) {
		writeError(w, http.StatusBadRequest, "after "+strconv.Quote(after)+": want an event id such as 1700000000000-0")
		return
	}
	limit, ok := intParam(w, q.Get("limit"), "limit", defaultEvents, maxEvents)
	if !ok {
		return
	}
	evs, err := a.client.Events(r.Context(), r.PathValue("id"), after, int64(limit))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	body := EventsBody{Events: evs, Next: after}
	if len(evs) > 0 {
		body.Next = evs[len(evs)-1].ID
	}
	writeJSON(w, http.StatusOK, body)
}

// CancelRequest is the optional body of POST /v1/runs/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason"`
}

// CancelBody answers POST /v1/runs/{id}/cancel.
type CancelBody struct {
	ID      string `json:"id"`
	Status  string `json:"status"`  // the run's status after the cancel
	Running int    `json:"running"` // nodes still RUNNING; their workers are told at once (pushed; the heartbeat is the fallback)
	Already bool   `json:"already"` // the run had been cancelled before
}

func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := fence.ValidateID("run id", id); err != nil {
		a.fail(w, r, err)
		return
	}
	body, ok := a.readBody(w, r, maxCancelBody)
	if !ok {
		return
	}
	var req CancelRequest
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "body: want {\"reason\": \"...\"} or nothing: "+err.Error())
			return
		}
	}
	if len(req.Reason) > maxReason {
		writeError(w, http.StatusBadRequest, "reason: "+strconv.Itoa(len(req.Reason))+" bytes, at most "+strconv.Itoa(maxReason))
		return
	}
	res, err := a.client.Cancel(r.Context(), id, req.Reason)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, CancelBody{ID: id, Status: res.RunStatus, Running: res.Running, Already: res.Already})
}

// DeleteBody answers DELETE /v1/runs/{id}.
type DeleteBody struct {
	ID      string `json:"id"`
	Status  string `json:"status"` // what the run ended as
	Deleted bool   `json:"deleted"`
}

// deleteRun removes an ended run (runner.Client.Delete): 409 while it is
// QUEUED or RUNNING, in the words the CLI prints.
func (a *api) deleteRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := fence.ValidateID("run id", id); err != nil {
		a.fail(w, r, err)
		return
	}
	status, err := a.client.Delete(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("run_deleted", "run_id", id, "status", status, "remote_addr", r.RemoteAddr)
	writeJSON(w, http.StatusOK, DeleteBody{ID: id, Status: status, Deleted: true})
}

// RetryBody answers POST /v1/runs/{id}/retry.
type RetryBody struct {
	ID     string   `json:"id"`
	Status string   `json:"status"`          // RUNNING
	Ready  []string `json:"ready,omitempty"` // re-run nodes now READY
	// Already: the run was RUNNING already, or this Idempotency-Key
	// retried it before; nothing changed.
	Already bool `json:"already"`
}

// retry re-runs a FAILED or CANCELLED run (runner.Client.Retry). The
// request's Idempotency-Key header, when set, names it: the same key again
// is answered as the first time.
func (a *api) retry(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := fence.ValidateID("run id", id); err != nil {
		a.fail(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if key != "" {
		if err := fence.ValidateID("Idempotency-Key", key); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	res, err := a.client.Retry(r.Context(), id, key)
	if err != nil && (fence.IsRefused(err) || res.Status == "") {
		a.fail(w, r, err)
		return
	}
	if err != nil { // stored; the sweeper delivers what failed to enqueue
		a.log.Warn("retry_enqueue_failed", "run_id", id, "err", err)
	}
	writeJSON(w, http.StatusOK, RetryBody{ID: id, Status: res.Status, Ready: res.Ready,
		Already: res.Replay || res.AlreadyRunning})
}

// ResumeRequest is the body of POST /v1/runs/{id}/nodes/{node}/resume:
// the value the parked node's wait is answered with (JSON), and the wait
// it answers (empty: the one the node is parked on now).
type ResumeRequest struct {
	Value  json.RawMessage `json:"value"`
	WaitID string          `json:"wait_id,omitempty"`
}

// ResumeBody answers POST /v1/runs/{id}/nodes/{node}/resume.
type ResumeBody struct {
	ID   string `json:"id"`
	Node string `json:"node"`
	// Answer is the wait's answer: this request's, or, when Already, the
	// first resume's.
	Answer fence.Answer `json:"answer"`
	// Already: the wait was answered before; nothing changed.
	Already bool `json:"already"`
}

// resume answers a parked node's wait (runner.Client.Resume): 200 with the
// answer; 409 when the node is not waiting on it or the run ended; 404
// unknown run or node; 400 a body that is not {"value": JSON}.
func (a *api) resume(w http.ResponseWriter, r *http.Request) {
	id, node := r.PathValue("id"), r.PathValue("node")
	for _, v := range [][2]string{{"run id", id}, {"node id", node}} {
		if err := fence.ValidateID(v[0], v[1]); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	body, ok := a.readBody(w, r, maxResumeBody)
	if !ok {
		return
	}
	var req ResumeRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "body: want {\"value\": JSON, \"wait_id\": \"...\"}: "+err.Error())
		return
	}
	if req.WaitID != "" {
		if err := fence.ValidateID("wait_id", req.WaitID); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	res, err := a.client.Resume(r.Context(), id, node, req.WaitID, req.Value)
	if err != nil && (fence.IsRefused(err) || res.Thread == "") {
		a.fail(w, r, err)
		return
	}
	if err != nil { // stored; the sweeper delivers the node
		a.log.Warn("resume_enqueue_failed", "run_id", id, "node_id", node, "err", err)
	}
	writeJSON(w, http.StatusOK, ResumeBody{ID: id, Node: node, Answer: res.Answer, Already: res.Replay})
}

// ListBody answers GET /v1/runs.
type ListBody struct {
	Runs []runner.RunSummary `json:"runs"`
}

var runStatuses = []string{"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := strings.ToUpper(q.Get("status"))
	if status != "" && !slices.Contains(runStatuses, status) {
		writeError(w, http.StatusBadRequest, "status "+strconv.Quote(q.Get("status"))+": want one of "+strings.Join(runStatuses, ", "))
		return
	}
	limit, ok := intParam(w, q.Get("limit"), "limit", defaultRuns, maxRuns)
	if !ok {
		return
	}
	thread := q.Get("thread")
	if thread != "" {
		if err := fence.ValidateID("thread", thread); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	runs, err := a.client.ListRuns(r.Context(), client.ListOptions{Status: status, Thread: thread, Limit: limit})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if runs == nil {
		runs = []runner.RunSummary{}
	}
	writeJSON(w, http.StatusOK, ListBody{Runs: runs})
}

// readBody reads the whole body, at most limit bytes; past that it answers
// 413 and returns false.
func (a *api) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	tooLarge := func() ([]byte, bool) {
		writeError(w, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(limit, 10)+" bytes")
		return nil, false
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge()
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading body: "+err.Error())
		return nil, false
	}
	return body, true
}

// intParam parses an optional positive integer query parameter.
func intParam(w http.ResponseWriter, raw, name string, def, maxV int) (int, bool) {
	if raw == "" {
		return def, true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > maxV {
		writeError(w, http.StatusBadRequest, name+" "+strconv.Quote(raw)+": want 1 to "+strconv.Itoa(maxV))
		return 0, false
	}
	return n, true
}

// fail answers err with the status it stands for. Bad input never becomes a
// 5xx; a 5xx is logged.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	body := ErrorBody{Error: strings.ReplaceAll(err.Error(), "\n", "; ")}
	if code == http.StatusBadRequest {
		body.Problems = problems(err)
	}
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the caller went away; nobody reads the answer
	case code >= 500:
		a.log.Error("api_error", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	}
	writeJSON(w, code, body)
}

func statusOf(err error) int {
	var ne net.Error
	switch {
	case errors.Is(err, runner.ErrInvalidSpec), errors.Is(err, fence.ErrInvalidID), errors.Is(err, fence.ErrInvalidData):
		return http.StatusBadRequest
	case errors.Is(err, fence.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, fence.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, fence.ErrRunConflict), errors.Is(err, fence.ErrRunDone), errors.Is(err, fence.ErrThreadBusy),
		errors.Is(err, fence.ErrNotRetryable), errors.Is(err, fence.ErrNotActiveRun), errors.Is(err, fence.ErrNotWaiting),
		errors.Is(err, fence.ErrRunActive):
		return http.StatusConflict
	case errors.As(err, &ne), errors.Is(err, redis.ErrClosed), errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// problems lists every *runner.SpecError inside err (a tree built with
// errors.Join).
func problems(err error) []Problem {
	var out []Problem
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		var se *runner.SpecError
		if errors.As(e, &se) {
			out = append(out, Problem{Field: se.Field, Message: se.Msg})
		}
	}
	walk(err)
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}

func writeText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, s)
}
