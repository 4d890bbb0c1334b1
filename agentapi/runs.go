package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// Runs: an API run is a baton run with the same id, of one graph node, on
// the baton thread of the API thread's id (a stateless run gets a thread
// of its own, a fresh id). Creating one is one submit; its
// multitask_strategy is baton's thread multitask, decided atomically in
// that submit. Everything shown of it later is read from baton's run.

// runsMaxBody bounds a create body (and a batch's) read into memory.
const runsMaxBody = 16 << 20

// runsState is what the runs group keeps in the process: the shared
// readers of run streams and the count of stream clients (sse.go).
type runsState struct {
	streams *runsStreamers
}

// runRoutes registers the routes of this group.
func (s *Server) runRoutes() {
	s.runs = &runsState{streams: newRunsStreamers(s.cfg.Client.Store(), s.cfg.Streams, s.log)}
	m := s.mux
	// Thread runs.
	m.HandleFunc("POST /threads/{thread_id}/runs", s.runsCreate(false, runsBackground))
	m.HandleFunc("POST /threads/{thread_id}/runs/stream", s.runsCreate(false, runsStream))
	m.HandleFunc("POST /threads/{thread_id}/runs/wait", s.runsCreate(false, runsWait))
	m.HandleFunc("GET /threads/{thread_id}/runs", s.runsList)
	m.HandleFunc("GET /threads/{thread_id}/runs/{run_id}", s.runsGet(false))
	m.HandleFunc("DELETE /threads/{thread_id}/runs/{run_id}", s.runsDelete(false))
	m.HandleFunc("GET /threads/{thread_id}/runs/{run_id}/join", s.runsJoin(false))
	m.HandleFunc("GET /threads/{thread_id}/runs/{run_id}/stream", s.runsJoinStream(false))
	m.HandleFunc("POST /threads/{thread_id}/runs/{run_id}/cancel", s.runsCancel(false))
	// Stateless runs.
	m.HandleFunc("POST /runs", s.runsCreate(true, runsBackground))
	m.HandleFunc("POST /runs/stream", s.runsCreate(true, runsStream))
	m.HandleFunc("POST /runs/wait", s.runsCreate(true, runsWait))
	m.HandleFunc("POST /runs/batch", s.runsBatch)
	m.HandleFunc("POST /runs/cancel", s.runsCancelMany)
	m.HandleFunc("GET /runs/{run_id}", s.runsGet(true))
	m.HandleFunc("DELETE /runs/{run_id}", s.runsDelete(true))
	m.HandleFunc("GET /runs/{run_id}/join", s.runsJoin(true))
	m.HandleFunc("GET /runs/{run_id}/stream", s.runsJoinStream(true))
	m.HandleFunc("POST /runs/{run_id}/cancel", s.runsCancel(true))
}

// runsMode is what a create answers: the run (background), its stream,
// or its output once it ends.
type runsMode int

const (
	runsBackground runsMode = iota
	runsStream
	runsWait
)

// runsHTTPError is an error answered with its status and {"detail": msg}.
type runsHTTPError struct {
	code int
	msg  string
}

func (e *runsHTTPError) Error() string { return e.msg }

// runsFail answers err: a *runsHTTPError or *runsBadInput as it says, a run that is
// not there 404, anything else 500 (logged).
func (s *Server) runsFail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *runsHTTPError
	var bad *runsBadInput
	switch {
	case errors.As(err, &ae):
		writeError(w, ae.code, ae.msg)
	case errors.As(err, &bad):
		writeError(w, http.StatusUnprocessableEntity, bad.msg)
	case errors.Is(err, errNotAPIRun):
		writeError(w, http.StatusNotFound, "Run not found")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// the client went away
	default:
		s.log.Error("agentapi_failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: "+err.Error())
	}
}

// runsReadBody reads a request body up to runsMaxBody.
func runsReadBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, runsMaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, &runsHTTPError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", runsMaxBody)}
	}
	return data, err
}

// runsCreate serves the create routes: POST /threads/{tid}/runs[/stream|/wait]
// and POST /runs[/stream|/wait].
func (s *Server) runsCreate(stateless bool, mode runsMode) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := runsReadBody(r)
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		body, err := parseRunBody(data)
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		body.Headers = headerConfigurable(r.Header)
		tid := r.PathValue("thread_id")
		run, err := s.runsSubmit(r.Context(), tid, stateless, body)
		if err != nil {
			s.runsFail(w, r, err)
			return
		}
		loc := runsLocation(runsPathThread(stateless, run.ThreadID), run.RunID)
		w.Header().Set("Content-Location", loc)
		switch mode {
		case runsBackground:
			writeJSON(w, http.StatusOK, run)
		case runsStream:
			w.Header().Set("Location", loc+"/stream")
			s.runsServeStream(w, r, run.ThreadID, run.RunID, "0", body.OnDisconnect == "cancel", stateless && body.OnCompletion != "keep")
		case runsWait:
			w.Header().Set("Location", loc+"/join")
			s.runsServeWait(w, r, run.ThreadID, run.RunID, body.OnDisconnect == "cancel", stateless && body.OnCompletion != "keep")
		}
	}
}

// runsHasResume says whether a command answers an interrupt.
func runsHasResume(command json.RawMessage) bool {
	var c map[string]json.RawMessage
	return json.Unmarshal(command, &c) == nil && runsPresent(c["resume"])
}

// runsPathThread is the thread a run's paths name: none for a stateless run.
func runsPathThread(stateless bool, tid string) string {
	if stateless {
		return ""
	}
	return tid
}

// runsSubmit submits one run: thread tid ("" and stateless: a new thread).
func (s *Server) runsSubmit(ctx context.Context, tid string, stateless bool, b *runBody) (*Run, error) {
	asst, err := s.runsResolveAssistant(ctx, b.AssistantID)
	if IsNoAssistant(err) {
		return nil, &runsHTTPError{http.StatusNotFound, fmt.Sprintf("No assistant found for %q. Make sure the assistant ID is for a valid assistant or a valid graph ID.", b.AssistantID)}
	}
	if err != nil {
		return nil, err
	}
	if stateless {
		tid = newID()
	} else {
		if fence.ValidateID("thread", tid) != nil {
			return nil, runsBadf("thread_id: %q is not a valid id", tid)
		}
		ok, err := s.runsThreadExists(ctx, tid)
		if err != nil {
			return nil, err
		}
		if !ok && b.IfNotExists != "create" {
			return nil, &runsHTTPError{http.StatusNotFound, fmt.Sprintf("Thread %s not found", tid)}
		}
	}
	rid := newID()
	assistant, graph := asst.ID, asst.GraphID
	// The assistant's config and context, under the run's own, as the
	// reference merges them: key by key, and configurable's keys too.
	config := map[string]json.RawMessage{}
	_ = json.Unmarshal(asst.Config, &config)
	configurable := map[string]any{}
	if raw := config["configurable"]; runsPresent(raw) {
		_ = json.Unmarshal(raw, &configurable)
	}
	for k, v := range b.Config {
		config[k] = v
	}
	if raw := b.Config["configurable"]; runsPresent(raw) {
		_ = json.Unmarshal(raw, &configurable)
	}
	if merged := mergeObjects(asst.Context, b.Context); merged != nil {
		b.Context = merged
	}
	for k, v := range b.Headers {
		configurable[k] = v
	}
	// As the reference: the run's identity in config.configurable, its
	// metadata in config.metadata.
	configurable["run_id"], configurable["thread_id"] = rid, tid
	configurable["graph_id"], configurable["assistant_id"] = graph, assistant
	config["configurable"], _ = json.Marshal(configurable)
	// The run's metadata, as the reference merges it: the assistant's, the
	// thread's (graph_id and assistant_id stamped in it), then the run's
	// own; it is config.metadata too.
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal(asst.Metadata, &meta)
	if !stateless {
		if rec, err := s.cfg.Client.Store().AgentThread(ctx, tid); err == nil {
			_ = json.Unmarshal(rec.Metadata, &meta)
		}
	}
	meta["graph_id"], _ = json.Marshal(graph)
	meta["assistant_id"], _ = json.Marshal(assistant)
	for k, v := range b.Metadata {
		meta[k] = v
	}
	b.Metadata = meta
	config["metadata"], _ = json.Marshal(meta)
	if !runsPresent(b.Input) && !runsPresent(b.Command) {
		// No input: go on from the thread's state, as LangGraph does with
		// None (the SDKs leave a None input out of the body).
		b.Input = json.RawMessage("null")
	}
	in := graphInput{Graph: graph, Input: b.Input, Command: b.Command, Config: config, StreamMode: b.StreamMode,
		Context: b.Context, InterruptBefore: b.InterruptBefore, InterruptAfter: b.InterruptAfter,
		CheckpointID: b.CheckpointID, Subgraphs: b.StreamSubgraphs, AssistantID: assistant, Metadata: b.Metadata,
		Interrupts: "end"}
	if runsHasResume(b.Command) {
		ids, err := s.runsPendingInterruptIDs(ctx, tid)
		if err != nil {
			return nil, err
		}
		ids = append([]string{}, ids...)
		in.Resumes = &ids
	}
	raw, err := s.runsNodeInput(in)
	if err != nil {
		return nil, err
	}
	multitask := b.MultitaskStrategy
	if multitask == "" {
		multitask = "reject"
	}
	run := &spec.Run{ID: rid, Thread: tid, Multitask: multitask,
		Nodes:   []spec.Node{{ID: runNode, Kind: runNodeKind, Input: raw}},
		StartIn: spec.Duration(time.Duration(b.AfterSeconds * float64(time.Second)))}
	if b.Webhook != "" {
		run.Notify = &spec.Notify{URL: b.Webhook}
	}
	_, err = s.cfg.Client.Submit(ctx, run)
	switch {
	case errors.Is(err, fence.ErrThreadBusy):
		return nil, &runsHTTPError{http.StatusConflict, "Thread is already running a task. Wait for it to finish or choose a different multitask strategy."}
	case errors.Is(err, spec.ErrInvalid):
		// The spec's words for the API's fields.
		msg := strings.NewReplacer("notify.url", "webhook", "notify", "webhook", "start_in", "after_seconds").Replace(err.Error())
		return nil, runsBadf("%s", msg)
	case err != nil:
		// Stored, with its delivery left to the sweeper, is a created run.
		if _, rerr := s.cfg.Client.Store().Locate(ctx, rid); rerr != nil {
			return nil, err
		}
		s.log.Warn("agentapi_run_enqueue_failed", "run_id", rid, "err", err)
	}
	if !stateless {
		// graph_id and assistant_id in the thread's metadata, as the
		// reference stamps them (UIs filter threads on them). After the
		// submit, so a refused run changes nothing; a retry stamps again.
		if err := s.stampThread(ctx, tid, graph, assistant); err != nil {
			s.log.Warn("agentapi_thread_stamp_failed", "thread_id", tid, "run_id", rid, "err", err)
		}
	}
	view, _, err := s.runsRead(ctx, "", rid)
	return view, err
}

// mergeObjects is base's keys overlaid with over's, for two JSON objects;
// nil when neither has a key.
func mergeObjects(base, over json.RawMessage) json.RawMessage {
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(base, &m)
	_ = json.Unmarshal(over, &m)
	if len(m) == 0 {
		return nil
	}
	out, _ := json.Marshal(m)
	return out
}
