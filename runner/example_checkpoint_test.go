package runner_test

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// agentState is what an agent kind checkpoints between its steps.
type agentState struct {
	Turn int  `json:"turn"`
	Done bool `json:"done"`
}

func agentStep(_ context.Context, s agentState) agentState {
	s.Turn++
	s.Done = s.Turn == 10
	return s
}

// A kind that resumes from its node thread's newest checkpoint and saves
// one after every step. A save the store refuses (another worker owns the
// node now) ends the attempt.
func ExampleTask_SaveCheckpoint() {
	agent := runner.KindFunc(func(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
		state := agentState{}
		cp, err := t.Checkpoint(ctx, "agent") // the newest of the node's thread in namespace "agent"
		switch {
		case errors.Is(err, fence.ErrNoCheckpoint): // a fresh start
		case err != nil:
			return nil, err
		default:
			_ = json.Unmarshal(cp.Data, &state)
		}
		for !state.Done {
			state = agentStep(ctx, state)
			if _, err := t.SaveCheckpoint(ctx, "agent", state); err != nil {
				return nil, err // fence.IsFenced: another worker owns the node now; stop
			}
		}
		return json.Marshal(state)
	})
	_ = agent // w.Register("agent", agent) on a runner.Worker
}
