package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// A thread's status is not stored: it is read from baton's thread each
// time (docs/agent-server.md, "Thread status"):
//   - busy: the thread's active run has not ended, or runs wait behind it;
//   - else, from the thread's last run: interrupted when its result holds
//     interrupts (with them) or steps left (a breakpoint), error when it
//     FAILED, idle otherwise (or
//     when there is no run, or it is no longer kept);
//   - a state update's run (POST /threads/{id}/state) leaves the status as
//     it was: its record remembers the status and the new values.

// Thread statuses, the reference server's words.
const (
	threadIdle        = "idle"
	threadBusy        = "busy"
	threadInterrupted = "interrupted"
	threadError       = "error"
)

// threadState is what a thread shows of its runs.
type threadState struct {
	Status string `json:"status"`
	// Values are the state values the last run ended with; nil when not
	// known.
	Values json.RawMessage `json:"values,omitempty"`
	// Interrupts are the pending interrupts by task (the reference's
	// map); empty unless interrupted.
	Interrupts map[string][]json.RawMessage `json:"interrupts"`
}

// graphResult is the result of a graph node's run (package langgraph):
// {"values", "interrupts": [...]}, or a state update's {"checkpoint"}.
type graphResult struct {
	Values     json.RawMessage   `json:"values"`
	Interrupts []json.RawMessage `json:"interrupts"`
	Next       []string          `json:"next"`
	Checkpoint json.RawMessage   `json:"checkpoint"`
}

// threadStatus derives rec's status from baton's thread.
func (s *Server) threadStatus(ctx context.Context, rec *fence.AgentThread) (threadState, error) {
	st := threadState{Status: threadIdle, Interrupts: map[string][]json.RawMessage{}}
	info, err := s.cfg.Client.Thread(ctx, rec.ID)
	if errors.Is(err, fence.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if len(info.Queued) > 0 || (info.ActiveStatus != "" && !client.State(info.ActiveStatus).Ended()) {
		st.Status = threadBusy
		return st, nil
	}
	if info.Active == "" {
		return st, nil
	}
	if info.Active == rec.SnapRun && len(rec.Snap) > 0 {
		var snap threadState
		if err := json.Unmarshal(rec.Snap, &snap); err == nil && snap.Status != "" {
			if snap.Interrupts == nil {
				snap.Interrupts = st.Interrupts
			}
			return snap, nil
		}
	}
	run, err := s.cfg.Client.Status(ctx, info.Active)
	if errors.Is(err, fence.ErrNotFound) {
		return st, nil // past its retention: nothing more is known
	}
	if err != nil {
		return st, err
	}
	node := graphNode(run)
	switch {
	case run.Status == string(client.Failed):
		st.Status = threadError
	case node != nil && run.Status == string(client.Succeeded):
		res := readResult(node.Result)
		if len(res.Values) > 0 && string(res.Values) != "null" {
			st.Values = res.Values
		}
		st.Interrupts = interruptsByTask(res.Interrupts)
		if len(res.Interrupts) > 0 || len(res.Next) > 0 {
			// An interrupt(), or a breakpoint (interrupt_before or
			// interrupt_after): steps are left, as the reference says.
			st.Status = threadInterrupted
		}
	}
	return st, nil
}

// readResult reads a graph node's result: an API run's {"values",
// "interrupts", "next"}, a state update's {"checkpoint"}, or, for a graph
// run submitted without the API's fields, the graph's output itself, which
// is its state's values.
func readResult(raw json.RawMessage) graphResult {
	var res graphResult
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) != nil {
		return res
	}
	_, api := keys["interrupts"]
	_, update := keys["checkpoint"]
	switch {
	case api || update:
		_ = json.Unmarshal(raw, &res)
	default:
		res.Values = raw
	}
	return res
}

// graphNode is the node of an API run: the one named "graph", else the
// first.
func graphNode(run *fence.RunInfo) *fence.NodeInfo {
	for i := range run.Nodes {
		if run.Nodes[i].ID == "graph" {
			return &run.Nodes[i]
		}
	}
	if len(run.Nodes) > 0 {
		return &run.Nodes[0]
	}
	return nil
}

// interruptsByTask groups interrupts as the reference's thread does, by
// the task that raised them ("task_id" when the worker says, else each
// interrupt's own id).
func interruptsByTask(list []json.RawMessage) map[string][]json.RawMessage {
	out := map[string][]json.RawMessage{}
	for _, raw := range list {
		var in struct {
			ID     string `json:"id"`
			TaskID string `json:"task_id"`
		}
		_ = json.Unmarshal(raw, &in)
		key := in.TaskID
		if key == "" {
			key = in.ID
		}
		out[key] = append(out[key], raw)
	}
	return out
}

// graphOf is the graph a thread's metadata names ("" when none).
func graphOf(rec *fence.AgentThread) string {
	var m struct {
		GraphID string `json:"graph_id"`
	}
	_ = json.Unmarshal(rec.Metadata, &m)
	return m.GraphID
}

// updateThread applies change to a thread's record: it reads the record,
// asks change for the fields to write (none: nothing to do), and writes
// them if the record did not change meanwhile, else reads again. The op
// id makes the store's retry of a lost reply safe.
func (s *Server) updateThread(ctx context.Context, thread string,
	change func(rec *fence.AgentThread) (map[string]string, error)) (*fence.AgentThread, error) {
	store, op := s.cfg.Client.Store(), newOp()
	for try := 0; ; try++ {
		rec, err := store.AgentThread(ctx, thread)
		if err != nil {
			return nil, err
		}
		fields, err := change(rec)
		if err != nil || len(fields) == 0 {
			return rec, err
		}
		rec, err = store.WriteAgentThread(ctx, thread, rec.Rev, op, fields)
		if errors.Is(err, fence.ErrRecordChanged) && try < maxWriteTries {
			continue
		}
		return rec, err
	}
}

// mergeMetadata returns rec's metadata with patch's keys set, as the
// reference merges ({...old, ...patch}); changed is false when that is
// what rec holds already.
func mergeMetadata(rec []byte, patch object) (merged []byte, changed bool) {
	cur := parseObject(rec)
	next := maps.Clone(cur)
	for k, v := range patch {
		next[k] = v
	}
	merged = next.marshal()
	return merged, string(merged) != string(cur.marshal())
}

// stampThread records in thread's metadata the graph and assistant its
// runs use (graph_id, assistant_id), as the reference does when a run is
// created; the thread's record is created when it has none (a run on a
// new thread, or a stateless run's thread). The runs routes call it when
// they create a run. Safe to call again: a thread stamped alike is not
// written.
func (s *Server) stampThread(ctx context.Context, thread, graphID, assistantID string) error {
	if !isUUID(thread) {
		return fmt.Errorf("thread %q: %w: not a UUID", thread, fence.ErrInvalidID)
	}
	stamp := object{}
	for k, v := range map[string]string{"graph_id": graphID, "assistant_id": assistantID} {
		if v != "" {
			stamp[k], _ = json.Marshal(v)
		}
	}
	_, _, err := s.cfg.Client.Store().PutAgentThread(ctx, thread, stamp.marshal(), "do_nothing", newOp())
	if err != nil {
		return err
	}
	_, err = s.updateThread(ctx, thread, func(rec *fence.AgentThread) (map[string]string, error) {
		merged, changed := mergeMetadata(rec.Metadata, stamp)
		if !changed {
			return nil, nil
		}
		return map[string]string{"metadata": string(merged)}, nil
	})
	return err
}

// maxWriteTries bounds how often a record write is redone after another
// writer came first: each round lets one writer through, so it is the
// most writers of one record at once that are all answered.
const maxWriteTries = 100
