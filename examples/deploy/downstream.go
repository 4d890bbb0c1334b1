package deploy

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/batonrun/baton/fence"
)

// Downstream stands for the services run.json's http nodes call: a
// migration runner (POST /migrate), a deploy API (/deploy) and a chat
// webhook (/notify). Each route performs its side effect only behind
// fence.GuardHTTP, which admits a request's Baton-Fencing-Token only if no
// newer owner of the same node has been seen, and answers 409 otherwise: a
// paused worker's late call cannot undo what its successor did. It records
// every call, admitted or not.
type Downstream struct {
	h   http.Handler
	log *slog.Logger

	mu     sync.Mutex
	calls  []Call
	newest map[string]int64 // token resource (run/node) -> newest epoch admitted
}

// Call is one request the Downstream answered.
type Call struct {
	At     time.Time // when the request arrived
	Path   string
	Token  fence.Token // zero when the header was missing or malformed
	Status int
	Newest int64 // the newest epoch admitted for the token's node, as of the answer
}

// Admitted reports whether the guard let the call act.
func (c Call) Admitted() bool { return c.Status < 300 }

// NewDownstream returns the services with an in-memory guard. log receives
// each call at Info and the guard's refusals at Warn (nil: slog.Default()).
func NewDownstream(log *slog.Logger) *Downstream {
	log = cmp.Or(log, slog.Default())
	act := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.TokenFrom(r.Context())
		// The side effect goes here, after the admit; the reply becomes
		// the node's result.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "op": r.URL.Path, "epoch": tok.Epoch})
	})
	guarded := fence.GuardHTTP(fence.NewMemoryGuard(), act, &fence.GuardHTTPOptions{Logger: log})
	mux := http.NewServeMux()
	for _, p := range []string{"/migrate", "/deploy", "/notify"} {
		mux.Handle("POST "+p, guarded)
	}
	return &Downstream{h: mux, log: log.With("component", "downstream"), newest: map[string]int64{}}
}

func (d *Downstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	d.h.ServeHTTP(rec, r)
	tok, _ := fence.ParseToken(r.Header.Get(fence.HeaderFencingToken))
	d.mu.Lock()
	if rec.status < 300 {
		d.newest[tok.Resource()] = max(d.newest[tok.Resource()], tok.Epoch)
	}
	d.calls = append(d.calls, Call{At: at, Path: r.URL.Path, Token: tok, Status: rec.status,
		Newest: d.newest[tok.Resource()]})
	d.mu.Unlock()
	d.log.Info("call", "path", r.URL.Path, "token", r.Header.Get(fence.HeaderFencingToken), "status", rec.status)
}

// Calls returns the calls answered so far, oldest first.
func (d *Downstream) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
