package agentapi

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/batonrun/baton/fence"
)

// runsGraphNamespace is the reference server's NAMESPACE_GRAPH: a graph's
// default assistant is uuid5(runsGraphNamespace, graph id).
var runsGraphNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x21, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// errNoAssistant: an assistant id that is neither a graph of the project
// nor the id of one's default assistant.
var errNoAssistant = errors.New("agentapi: assistant not found")

// runsUUID4 returns a random (version 4) UUID, the form of every id the
// API makes (runs, stateless runs' threads).
func runsUUID4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return runsFormatUUID(b)
}

// runsDefaultAssistantID is the id of a graph's default assistant, derived as
// the reference server derives it (uuid5 of NAMESPACE_GRAPH and the graph
// id), so an id an SDK learnt from LangGraph's server names the same
// assistant here.
func runsDefaultAssistantID(graph string) string {
	h := sha1.New()
	h.Write(runsGraphNamespace[:])
	h.Write([]byte(graph))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	return runsFormatUUID(b)
}

func runsFormatUUID(b [16]byte) string {
	s := hex.EncodeToString(b[:])
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// runsResolveAssistant returns the assistant and graph an assistant_id
// names: a graph id of the project (its default assistant), or a default
// assistant's id. Else errNoAssistant.
//
// The assistants group (assistants.go) extends this to the assistants it
// stores: a stored assistant's id answers its own graph.
func (s *Server) runsResolveAssistant(_ context.Context, id string) (assistant, graph string, err error) {
	ids := s.cfg.Graphs.IDs()
	if slices.Contains(ids, id) {
		return runsDefaultAssistantID(id), id, nil
	}
	for _, g := range ids {
		if runsDefaultAssistantID(g) == id {
			return id, g, nil
		}
	}
	return "", "", fmt.Errorf("%w: %q", errNoAssistant, id)
}

// runsThreadExists reports whether the API thread tid exists as far as
// runs are concerned: baton knows it (a run or a checkpoint of it).
//
// The threads group (threads.go) extends this to its own thread record,
// so that a thread created with POST /threads and no run yet exists too.
func (s *Server) runsThreadExists(ctx context.Context, tid string) (bool, error) {
	if fence.ValidateID("thread", tid) != nil {
		return false, nil
	}
	_, err := s.cfg.Client.Store().Thread(ctx, tid)
	switch {
	case errors.Is(err, fence.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// runsPendingInterruptIDs returns the ids of the interrupts the thread's
// last run stopped at (its graph node's result {"values", "interrupts":
// [{"id", ...}]}); none when it has no run, its last run has not ended,
// or it did not stop at an interrupt. A run resuming them names them
// (graph input "resumes"), so the graph worker continues an interrupt only
// while it is still the thread's: of two concurrent resumes, one does.
func (s *Server) runsPendingInterruptIDs(ctx context.Context, tid string) ([]string, error) {
	store := s.cfg.Client.Store()
	th, err := store.Thread(ctx, tid)
	if errors.Is(err, fence.ErrNotFound) || (err == nil && (th.Active == "" || th.ActiveStatus != "SUCCEEDED")) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := store.GetRun(ctx, th.Active)
	if err != nil || len(info.Nodes) != 1 || info.Nodes[0].ID != runNode {
		return nil, nil //nolint:nilerr // not an API run, or gone since: no interrupt of ours
	}
	var res struct {
		Interrupts []struct {
			ID string `json:"id"`
		} `json:"interrupts"`
	}
	if json.Unmarshal(info.Nodes[0].Result, &res) != nil {
		return nil, nil
	}
	var ids []string
	for _, in := range res.Interrupts {
		if in.ID != "" {
			ids = append(ids, in.ID)
		}
	}
	return ids, nil
}
