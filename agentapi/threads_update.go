package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
)

// stateUpdate is the graph node's update_state input.
type stateUpdate struct {
	Values       json.RawMessage `json:"values"`
	AsNode       string          `json:"as_node,omitempty"`
	CheckpointID string          `json:"checkpoint_id,omitempty"`
	CheckpointNS string          `json:"checkpoint_ns,omitempty"`
}

// updateWait bounds how long a state update waits for its run, once
// stored, whether or not its caller is still there.
const updateWait = 5 * time.Minute

// updateError is a state update refused or failed, with the status the
// reference answers it with.
type updateError struct {
	code int
	msg  string
}

func (e *updateError) Error() string { return e.msg }

// checkValues refuses values that are neither an object nor an array (nor
// null), as the reference's schema does.
func checkValues(v json.RawMessage) bool {
	t := strings.TrimSpace(string(v))
	return t == "" || t == "null" || t[0] == '{' || t[0] == '['
}

// applyUpdate runs the graph's update_state as a baton run of the thread
// with multitask reject: refused (409) in the same atomic step that would
// store it while another run is active or queued. It waits for the run and
// returns the checkpoint it made. The update's run does not stand for the
// thread's status: the record remembers the status the thread had, with
// its values after the update. An error is an *updateError or one of the
// store's.
func (s *Server) applyUpdate(ctx context.Context, rec *fence.AgentThread, up stateUpdate) (json.RawMessage, error) {
	graph := graphOf(rec)
	if graph == "" {
		return nil, &updateError{http.StatusBadRequest, fmt.Sprintf("Thread %s has no graph ID", rec.ID)}
	}
	if len(up.Values) == 0 {
		up.Values = json.RawMessage("null")
	}
	if up.AsNode != "" {
		if missing, err := s.lacksNode(ctx, graph, up.AsNode); err == nil && missing {
			return nil, &updateError{http.StatusBadRequest, fmt.Sprintf("Node %s does not exist", up.AsNode)}
		}
	}
	before, err := s.threadStatus(ctx, rec)
	if err != nil {
		return nil, err
	}
	input, _ := json.Marshal(map[string]any{"graph": graph, "update_state": up})
	runID := newID()
	_, err = s.cfg.Client.Submit(ctx, &spec.Run{ID: runID, Thread: rec.ID, Multitask: "reject",
		Nodes: []spec.Node{{ID: "graph", Kind: "graph", Input: input, MaxAttempts: 1}}})
	if errors.Is(err, fence.ErrThreadBusy) {
		return nil, &updateError{http.StatusConflict, "Thread is busy"}
	}
	if err != nil {
		return nil, err
	}
	// The run is stored: see it through, and record the thread's status
	// after it, even when the caller goes away meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), updateWait)
	defer cancel()
	run, err := s.cfg.Client.Wait(ctx, runID)
	if err != nil {
		return nil, err
	}
	after := before
	var res graphResult
	node := graphNode(run)
	ok := run.Status == string(client.Succeeded) && node != nil && json.Unmarshal(node.Result, &res) == nil
	if ok {
		after.Values = s.valuesNow(ctx, graph, rec.ID, before.Values)
	}
	snap, _ := json.Marshal(after)
	if _, err := s.updateThread(ctx, rec.ID, func(*fence.AgentThread) (map[string]string, error) {
		return map[string]string{"snap_run": runID, "snap": string(snap)}, nil
	}); err != nil {
		return nil, err
	}
	if !ok {
		msg := "state update failed"
		if node != nil && node.Error != "" {
			msg = node.Error
		}
		code := http.StatusInternalServerError
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "InvalidUpdateError") {
			code = http.StatusBadRequest
		}
		return nil, &updateError{code, msg}
	}
	return res.Checkpoint, nil
}

// answerUpdateError answers an error of applyUpdate.
func (s *Server) answerUpdateError(w http.ResponseWriter, r *http.Request, err error) {
	var ue *updateError
	if errors.As(err, &ue) {
		writeError(w, ue.code, ue.msg)
		return
	}
	s.storeFailed(w, r, err)
}

// updateState is POST /threads/{id}/state: {"checkpoint": {...}}.
func (s *Server) updateState(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.threadFor(w, r)
	if !ok {
		return
	}
	var body struct {
		Values       json.RawMessage `json:"values"`
		AsNode       *string         `json:"as_node"`
		CheckpointID *string         `json:"checkpoint_id"`
		Checkpoint   *checkpointRef  `json:"checkpoint"`
	}
	if !bodyInto(w, r, &body) || !body.Checkpoint.check(w, "checkpoint") {
		return
	}
	if !checkValues(body.Values) {
		invalid(w, "values", "expected an object or an array of objects")
		return
	}
	up := stateUpdate{Values: body.Values, CheckpointID: body.Checkpoint.id(), CheckpointNS: body.Checkpoint.ns()}
	if body.CheckpointID != nil && *body.CheckpointID != "" {
		up.CheckpointID = *body.CheckpointID
	}
	if body.AsNode != nil {
		up.AsNode = *body.AsNode
	}
	cp, err := s.applyUpdate(r.Context(), rec, up)
	if err != nil {
		s.answerUpdateError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"checkpoint": cp})
}

// superstep is one of POST /threads's supersteps.
type superstep struct {
	Updates []struct {
		Values  json.RawMessage `json:"values"`
		Command json.RawMessage `json:"command"`
		AsNode  *string         `json:"as_node"`
	} `json:"updates"`
}

// checkSupersteps refuses supersteps baton cannot apply, before anything
// is stored: each must hold one update, with values (not a command) and
// as_node.
func checkSupersteps(w http.ResponseWriter, steps []superstep) bool {
	for i, st := range steps {
		field := fmt.Sprintf("supersteps[%d].updates", i)
		if len(st.Updates) != 1 {
			invalid(w, field, "baton applies one update per superstep")
			return false
		}
		u := st.Updates[0]
		switch {
		case u.AsNode == nil:
			invalid(w, field+"[0].as_node", "required")
			return false
		case len(u.Command) > 0 && string(u.Command) != "null":
			invalid(w, field+"[0].command", "not supported by baton yet: pass values")
			return false
		case !checkValues(u.Values):
			invalid(w, field+"[0].values", "expected an object or an array of objects")
			return false
		}
	}
	return true
}

// applySupersteps applies a new thread's supersteps, one state update run
// each, in order.
func (s *Server) applySupersteps(ctx context.Context, rec *fence.AgentThread, steps []superstep) error {
	for _, st := range steps {
		u := st.Updates[0]
		if _, err := s.applyUpdate(ctx, rec, stateUpdate{Values: u.Values, AsNode: *u.AsNode}); err != nil {
			return err
		}
	}
	return nil
}

// lacksNode reports whether graph has no node as_node (LangGraph's own
// "__start__", "__input__" and the like always pass), asking the graph
// worker for the graph's drawing.
func (s *Server) lacksNode(ctx context.Context, graph, asNode string) (bool, error) {
	if strings.HasPrefix(asNode, "__") {
		return false, nil
	}
	raw, err := s.cfg.Graphs.Call(ctx, "graph", map[string]any{"graph": graph})
	if err != nil {
		return false, err
	}
	var g struct {
		Nodes []struct {
			ID json.RawMessage `json:"id"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &g); err != nil || len(g.Nodes) == 0 {
		return false, errors.New("graph drawing without nodes")
	}
	for _, n := range g.Nodes {
		var id string
		if json.Unmarshal(n.ID, &id) == nil && id == asNode {
			return false, nil
		}
	}
	return true, nil
}

// valuesNow reads the thread's state values now, or keeps old when the
// graph worker cannot tell.
func (s *Server) valuesNow(ctx context.Context, graph, thread string, old json.RawMessage) json.RawMessage {
	raw, err := s.cfg.Graphs.Call(ctx, "get_state", stateArgs{Graph: graph, Thread: thread})
	if err != nil {
		return old
	}
	var st struct {
		Values json.RawMessage `json:"values"`
	}
	if json.Unmarshal(raw, &st) != nil || len(st.Values) == 0 {
		return old
	}
	return st.Values
}
