package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/batonrun/baton/runner"
)

// Noop returns a kind that succeeds at once with its input as its result
// ({} for no input). It exists to join branches of a DAG, to test a fleet
// end to end, and to measure baton's own cost per node.
func Noop() runner.Kind { return runner.KindFunc(noop) }

func noop(_ context.Context, t *runner.Task) (json.RawMessage, error) {
	in := bytes.TrimSpace(t.Input)
	if len(in) == 0 || string(in) == "null" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid(in) {
		return nil, runner.Permanent(errors.New("noop: input is not valid JSON"))
	}
	return json.RawMessage(bytes.Clone(in)), nil
}
