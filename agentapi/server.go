package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/batonrun/baton/client"
)

// Graphs is what the API needs of the runner's LangGraph project and its
// graph workers (package langgraph's Kind implements it).
type Graphs interface {
	// IDs lists the graph ids of the project's langgraph.json.
	IDs() []string
	// Call asks a graph worker for something only the graph knows: its
	// state, history, schemas or drawing. op names the request; args is
	// marshalled to JSON as its arguments.
	Call(ctx context.Context, op string, args any) (json.RawMessage, error)
}

// Config configures the handler.
type Config struct {
	// Client reads and writes baton's store. Required.
	Client *client.Client
	// Graphs is the runner's LangGraph project. Required.
	Graphs Graphs
	// Token, when set, is required as "Authorization: Bearer <token>" or
	// "X-Api-Key: <token>" on every route but /ok. Zero value: no token;
	// the handler then answers loopback callers only (the admin API's rule).
	Token string
	// Logger receives the handler's logs. Zero value: slog.Default().
	Logger *slog.Logger

	// Runs and streams (runs.go, sse.go).
	Streams StreamLimits
}

// Server is the Agent Server API's handler.
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
	h   http.Handler // mux behind the token rule (system.go)

	runs     *runsState // runs.go
	defaults defaults   // assistants_store.go
}

// New returns the API's handler.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Graphs == nil {
		return nil, errors.New("agentapi: Config.Client and Config.Graphs are required")
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.Default()
	}
	// Each group of routes lives in a file of its own.
	s.systemRoutes()
	s.assistantRoutes()
	s.threadRoutes()
	s.runRoutes()
	s.storeRoutes()
	s.cronRoutes()
	s.h = s.guarded(s.mux)
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }
