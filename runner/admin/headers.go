package admin

import (
	"net/http"
	"strings"
)

// Content policies. Every answer forbids being framed (clickjacking) and
// posting a form anywhere but here (an injected "re-enter your token" form
// cannot send what is typed to another host).
const (
	// basePolicy covers every answer, the Asynq UI's pages included: its
	// prebuilt page runs inline scripts, so scripts are left to it.
	basePolicy = "frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'"
	// pagePolicy covers baton's own pages, which load only this server's
	// stylesheet and script, and hands HTML strings to the DOM only
	// through the script's one Trusted Types policy ("baton"), so a
	// string cannot become markup anywhere else on the page.
	pagePolicy = "default-src 'self'; style-src 'self'; img-src 'self' data:; " + basePolicy +
		"; require-trusted-types-for 'script'; trusted-types baton"
)

// secureHeaders sets the headers every answer carries: the base content
// policy (a page replaces it with its own, stricter one), no framing for
// browsers that predate frame-ancestors, no content sniffing, and no
// Referer beyond this origin.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", basePolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// monitorGuard applies the Asynq UI's mode and audit: with readOnly, it
// refuses every request but GET and HEAD (asynqmon's own read-only mode
// only hides its buttons and guards its API); otherwise every request that
// changes something (deleting, archiving, re-running, pausing a queue) is
// logged with who made it and what it answered.
func monitorGuard(g guard, readOnly bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		who := g.credential(r)
		client := g.proxies.client(r)
		if readOnly {
			g.log.Warn("monitor_action_refused", "method", r.Method, "path", r.URL.Path, "client", client, "credential", who)
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "the Asynq UI is read-only (MONITOR_READ_ONLY): "+
				r.Method+" "+strings.TrimPrefix(r.URL.Path, MonitorPath)+" refused")
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		g.log.Info("monitor_action", "method", r.Method, "path", r.URL.Path, "client", client,
			"credential", who, "status", rec.code())
	})
}

// statusRecorder notes the status an answer was sent with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) code() int { return cmpCode(s.status) }

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
