// Package agent is the conversation step of baton's fault harness
// (cmd/chaos): a Go node kind and an exec command that do the same thing,
// a few steps of work each saved as a checkpoint of the node's thread,
// resuming from the thread's newest checkpoint of the namespace. Every
// checkpoint holds a check.Step saying who wrote it (tag and fencing
// token) and what the attempt resumed from, which is what the thread checks
// of internal/chaos/check judge: an interrupted thread resumes from the
// interrupted run's last checkpoint, a rolled-back one from before the run.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/chaos/check"
	"github.com/batonrun/baton/runner"
)

// Kind is the Go kind's name; the harness's agent workers serve it.
const Kind = "chaos-agent"

// Queue is the Asynq queue of the agent's nodes, which only the agent
// workers serve.
const Queue = "agents"

// Input is a node's input, for both the Go kind and ExecCommand.
type Input struct {
	NS     string `json:"ns"`      // the checkpoint namespace
	Steps  int    `json:"steps"`   // checkpoints to save
	StepMS int    `json:"step_ms"` // work before each (at least 1)
}

// Run is the Go kind: it reads the newest checkpoint of its thread in
// in.NS, then saves in.Steps checkpoints, one after each step of work. A
// save the store refuses (fenced) or cannot make ends the attempt with the
// error: the runtime treats a fenced save as a lost lease and a Redis error
// as a failed attempt, so the next attempt resumes from what was stored.
func Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	var in Input
	if err := json.Unmarshal(t.Input, &in); err != nil || in.NS == "" || in.Steps < 1 {
		return nil, fmt.Errorf("%s: bad input %s", Kind, t.Input)
	}
	l := t.Lease
	var from string
	var fromV, i int64
	cp, err := t.Checkpoint(ctx, in.NS)
	switch {
	case errors.Is(err, fence.ErrNoCheckpoint):
	case err != nil:
		return nil, err
	default:
		if s, ok := check.ParseStep(cp.Data); ok {
			from, fromV, i = s.Tag, cp.Version, s.I
		}
	}
	tick := time.Duration(max(in.StepMS, 1)) * time.Millisecond
	for seq := int64(1); seq <= int64(in.Steps); seq++ {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(tick):
		}
		i++
		s := check.Step{Tag: check.MakeTag(l.Run, l.Node, l.Epoch, seq), Token: t.Token().String(),
			From: from, FromV: fromV, I: i}
		saved, err := t.SaveCheckpoint(ctx, in.NS, s)
		if err != nil {
			return nil, err
		}
		from, fromV = s.Tag, saved.Version
		t.SetProgress(int(100 * seq / int64(in.Steps)))
	}
	return json.Marshal(map[string]any{"ns": in.NS, "i": i, "last": from})
}

// ExecCommand is the exec kind's equivalent of Run, as a command: it reads
// BATON_CHECKPOINT_FILE and prints one ::checkpoint line per step. An exec
// command sees only the data, so its steps carry From but not FromV.
func ExecCommand(in Input) []string {
	sec := fmt.Sprintf("%d.%03d", in.StepMS/1000, in.StepMS%1000)
	script := fmt.Sprintf(`from=""; i=0
if [ -n "$BATON_CHECKPOINT_FILE" ]; then
  from=$(sed -n 's/.*"tag":"\([^"]*\)".*/\1/p' "$BATON_CHECKPOINT_FILE")
  i=$(sed -n 's/.*"i":\([0-9]*\).*/\1/p' "$BATON_CHECKPOINT_FILE")
fi
i=${i:-0}; seq=1
while [ "$seq" -le %d ]; do
  sleep %s; i=$((i + 1))
  tag="$BATON_RUN_ID|$BATON_NODE_ID|$BATON_EPOCH|$seq"
  echo "::checkpoint {\"tag\":\"$tag\",\"token\":\"$BATON_FENCING_TOKEN\",\"from\":\"$from\",\"i\":$i}"
  from=$tag; seq=$((seq + 1))
done
echo "{\"ns\":\"%s\",\"i\":$i,\"last\":\"$from\"}"`, in.Steps, sec, in.NS)
	return []string{"sh", "-c", script}
}
