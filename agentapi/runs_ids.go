package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batonrun/baton/fence"
)

// runsResolveAssistant returns the assistant an assistant_id names (a
// stored assistant's id, a graph id of the project, or its default
// assistant's id), or errAssistantUnknown.
func (s *Server) runsResolveAssistant(ctx context.Context, id string) (*Assistant, error) {
	a, err := s.ResolveAssistant(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("assistant %q: %w", id, err)
	}
	return a, nil
}

// runsThreadExists reports whether the API thread tid exists as far as
// runs are concerned: its record (POST /threads, or a run's stamp), or
// baton knows it (a run or a checkpoint of it, written without the API).
func (s *Server) runsThreadExists(ctx context.Context, tid string) (bool, error) {
	if fence.ValidateID("thread", tid) != nil {
		return false, nil
	}
	if _, err := s.cfg.Client.Store().AgentThread(ctx, tid); err == nil {
		return true, nil
	} else if !errors.Is(err, fence.ErrNotFound) {
		return false, err
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
