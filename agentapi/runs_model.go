package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// runNode is the id and kind of a run's one node: an API run is a baton
// run of one graph node (package langgraph's kind).
const (
	runNode     = "graph"
	runNodeKind = "graph"
)

// graphInput is the input of a run's graph node. It holds everything the
// API shows of the run later (assistant_id, metadata, kwargs), so that
// creating a run is one submit and reading one is a read of baton's run.
type graphInput struct {
	Graph           string                     `json:"graph"`
	Input           json.RawMessage            `json:"input,omitempty"`
	Command         json.RawMessage            `json:"command,omitempty"`
	Config          map[string]json.RawMessage `json:"config,omitempty"`
	StreamMode      []string                   `json:"stream_mode,omitempty"`
	Context         json.RawMessage            `json:"context,omitempty"`
	InterruptBefore json.RawMessage            `json:"interrupt_before,omitempty"`
	InterruptAfter  json.RawMessage            `json:"interrupt_after,omitempty"`
	CheckpointID    string                     `json:"checkpoint_id,omitempty"`
	Subgraphs       bool                       `json:"subgraphs,omitempty"`
	AssistantID     string                     `json:"assistant_id,omitempty"`
	Metadata        map[string]json.RawMessage `json:"metadata,omitempty"`
	// Interrupts "end": an interrupt() ends the attempt SUCCEEDED with the
	// interrupts in its result, as the reference server records a
	// human-in-the-loop pause (the run succeeds, the thread is interrupted).
	Interrupts string `json:"interrupts,omitempty"`
	// Resumes, with a command.resume, are the interrupts the thread's last
	// run stopped at when this run was created: the worker continues one
	// only if it is still pending at the thread's head, else the attempt
	// fails ("interrupt already answered"). Never omitted with a resume:
	// an empty list resumes nothing.
	Resumes *[]string `json:"resumes,omitempty"`
}

// runsNodeInput encodes the graph node's input.
func (s *Server) runsNodeInput(in graphInput) (json.RawMessage, error) { return json.Marshal(in) }

// Run is a run as the API shows it (the reference's Run schema).
type Run struct {
	RunID             string         `json:"run_id"`
	ThreadID          string         `json:"thread_id"`
	AssistantID       string         `json:"assistant_id"`
	CreatedAt         string         `json:"created_at"`
	UpdatedAt         string         `json:"updated_at"`
	Status            string         `json:"status"`
	Metadata          map[string]any `json:"metadata"`
	Kwargs            map[string]any `json:"kwargs"`
	MultitaskStrategy string         `json:"multitask_strategy"`
}

// RunStatus maps a baton run, and its graph node, to the API's run status:
//
//	QUEUED                                   pending
//	RUNNING, node not yet claimed (attempt 0) pending
//	RUNNING, node claimed, retrying, parked   running
//	SUCCEEDED                                success
//	FAILED                                   error
//	CANCELLED by its timeout                 timeout
//	CANCELLED (cancel, interrupt, rollback)  interrupted
//
// This is the one place status words are mapped.
func RunStatus(info *fence.RunInfo) string {
	switch info.Status {
	case "QUEUED":
		return "pending"
	case "SUCCEEDED":
		return "success"
	case "FAILED":
		return "error"
	case "CANCELLED":
		if strings.HasPrefix(info.CancelReason, "timeout") {
			return "timeout"
		}
		return "interrupted"
	}
	for _, n := range info.Nodes {
		if n.ID == runNode && n.Attempt == 0 {
			return "pending"
		}
	}
	return "running"
}

// runsEnded says whether an API run status is final.
func runsEnded(status string) bool { return status != "pending" && status != "running" }

// errNotAPIRun: a baton run that is not an API run (not one graph node),
// or one of another thread than the path names. Answered 404.
var errNotAPIRun = errors.New("agentapi: run not found")

// runsRead reads a run as the API shows it, with its baton run; thread,
// when set, must be the run's thread.
func (s *Server) runsRead(ctx context.Context, thread, rid string) (*Run, *fence.RunInfo, error) {
	if fence.ValidateID("run id", rid) != nil {
		return nil, nil, errNotAPIRun
	}
	store := s.cfg.Client.Store()
	info, err := store.GetRun(ctx, rid)
	if errors.Is(err, fence.ErrNotFound) {
		return nil, nil, errNotAPIRun
	}
	if err != nil {
		return nil, nil, err
	}
	tid := info.Thread
	if tid == "" {
		tid = rid
	}
	if (thread != "" && tid != thread) || len(info.Nodes) != 1 || info.Nodes[0].ID != runNode || info.Nodes[0].Kind != runNodeKind {
		return nil, nil, errNotAPIRun
	}
	raw, err := store.NodeInput(ctx, rid, runNode)
	if err != nil && !errors.Is(err, fence.ErrNotFound) {
		return nil, nil, err
	}
	var in graphInput
	_ = json.Unmarshal(raw, &in)
	return s.runsView(info, tid, in), info, nil
}

// runsView builds the API's run from baton's run and its node's input.
func (s *Server) runsView(info *fence.RunInfo, tid string, in graphInput) *Run {
	r := &Run{RunID: info.ID, ThreadID: tid, AssistantID: in.AssistantID, Status: RunStatus(info),
		CreatedAt: runsTime(info.CreatedAt), MultitaskStrategy: info.Multitask,
		Metadata: map[string]any{}, Kwargs: map[string]any{}}
	if r.AssistantID == "" {
		r.AssistantID = DefaultAssistantID(in.Graph)
	}
	if r.MultitaskStrategy == "" {
		r.MultitaskStrategy = "reject"
	}
	updated := info.CreatedAt
	if n := info.Nodes[0]; n.FinishedAt != nil {
		updated = *n.FinishedAt
	} else if n.StartedAt != nil {
		updated = *n.StartedAt
	}
	if info.FinishedAt != nil {
		updated = *info.FinishedAt
	}
	r.UpdatedAt = runsTime(updated)
	for k, v := range in.Metadata {
		r.Metadata[k] = v
	}
	kw := r.Kwargs
	kw["input"] = in.Input
	kw["config"] = in.Config
	kw["context"] = in.Context
	if !runsPresent(in.Context) {
		kw["context"] = map[string]any{}
	}
	kw["stream_mode"] = in.StreamMode
	kw["subgraphs"] = in.Subgraphs
	// As the reference: fields a run was not given are left out.
	for k, v := range map[string]json.RawMessage{"command": in.Command, "interrupt_before": in.InterruptBefore,
		"interrupt_after": in.InterruptAfter} {
		if runsPresent(v) {
			kw[k] = v
		}
	}
	if in.CheckpointID != "" {
		kw["checkpoint_id"] = in.CheckpointID
	}
	return r
}

// runsTime formats a time as the reference does (ISO 8601, UTC, ms).
func runsTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// runsLocation is a run's path: /threads/{tid}/runs/{rid}, or /runs/{rid}
// for a stateless run.
func runsLocation(thread, rid string) string {
	if thread == "" {
		return "/runs/" + rid
	}
	return fmt.Sprintf("/threads/%s/runs/%s", thread, rid)
}
