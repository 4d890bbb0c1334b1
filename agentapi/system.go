package agentapi

import (
	_ "embed"
	"net/http"

	"github.com/batonrun/baton/internal/version"
	"github.com/batonrun/baton/runner/admin"
)

// openAPI is the OpenAPI document of every route this package serves
// (GET /docs); a test holds the mux's routes to it.
//
//go:embed openapi.json
var openAPI []byte

// systemRoutes registers the routes of this group: GET /ok (no token
// needed, for load balancers), GET /info and GET /docs.
func (s *Server) systemRoutes() {
	s.mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	})
	s.mux.HandleFunc("GET /info", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, systemInfo{Version: version.String(), Context: "baton",
			Flags: systemInfoFlags{Assistants: true, Crons: true, StrictResume: true}})
	})
	s.mux.HandleFunc("GET /docs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	})
}

// systemInfo is GET /info's answer, in the reference's shape (api/meta.mjs).
type systemInfo struct {
	Version string          `json:"version"`
	Context string          `json:"context"`
	Flags   systemInfoFlags `json:"flags"`
}

type systemInfoFlags struct {
	Assistants               bool `json:"assistants"`
	Crons                    bool `json:"crons"`
	LangSmith                bool `json:"langsmith"`
	LangSmithTracingReplicas bool `json:"langsmith_tracing_replicas"`
	// StrictResume: a resume that answers an interrupt that is not waiting
	// is refused, whatever the run's strict_resume says (the graph
	// worker's check of the run's resumes).
	StrictResume bool `json:"strict_resume"`
}

// guarded puts the admin API's token rule in front of h: with
// Config.Token, a request needs "Authorization: Bearer <token>" or
// "X-Api-Key: <token>" (what LangGraph's SDKs send, from LANGGRAPH_API_KEY);
// without one, only callers on this machine are served. GET /ok is open,
// for load balancers' health checks.
func (s *Server) guarded(h http.Handler) http.Handler {
	g := admin.Guard(admin.GuardOptions{Token: s.cfg.Token, APIKeyHeader: "X-Api-Key", Logger: s.log.With("component", "agentapi")})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" && r.Method == http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		g.ServeHTTP(w, r)
	})
}
