package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// The exec kind's checkpoint protocol: a command saves its state by
// printing "::checkpoint {json}" on stdout, and an attempt of the same
// node (a retry, a takeover, a resume after a shutdown) finds the newest
// saved JSON in the file BATON_CHECKPOINT_FILE names. The namespace is the
// node's id, in the node's thread (BATON_THREAD_ID).
const (
	checkpointPrefix = "::checkpoint"
	envCheckpoint    = "BATON_CHECKPOINT_FILE"
	envThread        = "BATON_THREAD_ID"
	// checkpointLineMax is the longest ::checkpoint line collected: the
	// store's default cap on data plus room for the prefix and spaces.
	// Longer lines are refused without a round trip.
	checkpointLineMax = fence.DefaultCheckpointBytes + 1024
	// checkpointDrain bounds how long saving the ::checkpoint lines a
	// command printed before it exited may hold the attempt open.
	checkpointDrain = 30 * time.Second
)

// checkpointEnv returns env with BATON_THREAD_ID and, when the node's
// thread has a checkpoint in the namespace of the node's id,
// BATON_CHECKPOINT_FILE: a file in a new temporary directory holding the
// checkpoint's data exactly as saved. cleanup removes the directory. An
// inherited BATON_CHECKPOINT_FILE is dropped, so a command never reads
// another node's state. A task made outside a worker has no checkpoints.
func checkpointEnv(ctx context.Context, t *runner.Task, env []string) (_ []string, cleanup func(), _ error) {
	cleanup = func() {}
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, envCheckpoint+"=") {
			out = append(out, kv)
		}
	}
	out = append(out, envThread+"="+t.Lease.Thread)
	cp, err := t.Checkpoint(ctx, t.Lease.Node)
	switch {
	case errors.Is(err, fence.ErrNoCheckpoint), errors.Is(err, runner.ErrNoCheckpointStore):
		return out, cleanup, nil
	case err != nil:
		// Retryable: without its checkpoint the command would start over.
		return nil, cleanup, fmt.Errorf("exec: reading the node's checkpoint: %w", err)
	}
	dir, err := os.MkdirTemp("", "baton-checkpoint-")
	if err != nil {
		return nil, cleanup, fmt.Errorf("exec: checkpoint file: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(dir) }
	path := filepath.Join(dir, "checkpoint.json")
	if err := os.WriteFile(path, cp.Data, 0o600); err != nil {
		cleanup()
		return nil, func() {}, fmt.Errorf("exec: checkpoint file: %w", err)
	}
	return append(out, envCheckpoint+"="+path), cleanup, nil
}

// checkpointLines saves the ::checkpoint lines of one attempt's stdout. A
// line is saved before the next line is read, so what a command printed
// before it exited is stored before its node commits. A line that is not
// JSON, or is over the cap, is logged and skipped; the attempt goes on. A
// save the store refuses ends the attempt: the runtime cancels it as for
// a lost lease, and later lines are dropped.
type checkpointLines struct {
	ctx  context.Context // the attempt's; a save outlives its cancellation
	task *runner.Task
	log  *slog.Logger

	// Used by the reading goroutine only.
	buf     []byte // the line being collected
	in      bool   // collecting a ::checkpoint line
	over    bool   // it grew past checkpointLineMax
	stopped bool   // saving ended; drop the rest

	// For the drain (see drainTimeout).
	saving atomic.Int64 // UnixNano when the save under way started; 0: none
	spent  atomic.Int64 // nanoseconds spent saving so far
}

func newCheckpointLines(ctx context.Context, t *runner.Task, log *slog.Logger) *checkpointLines {
	l := t.Lease
	return &checkpointLines{ctx: ctx, task: t,
		log: log.With("component", "exec", "run_id", l.Run, "node_id", l.Node, "epoch", l.Epoch)}
}

// take consumes frag, a piece of stdout read by a bufio.Reader's
// ReadSlice, if it belongs to a ::checkpoint line: midLine says frag
// continues a line, full that the line goes on after it. It reports
// whether frag was taken; a taken line is not part of the result.
func (c *checkpointLines) take(frag []byte, midLine, full bool) bool {
	if !c.in {
		if midLine || !isCheckpointLine(frag) {
			return false
		}
		c.in, c.over, c.buf = true, false, c.buf[:0]
	}
	if !c.over {
		if len(c.buf)+len(frag) > checkpointLineMax {
			c.over, c.buf = true, c.buf[:0]
		} else {
			c.buf = append(c.buf, frag...)
		}
	}
	if !full {
		c.in = false
		c.save()
	}
	return true
}

// isCheckpointLine reports whether line starts a ::checkpoint line.
func isCheckpointLine(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimLeft(line, " \t"), []byte(checkpointPrefix))
	return ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r' || rest[0] == '\n')
}

// save saves the collected line.
func (c *checkpointLines) save() {
	if c.stopped {
		return
	}
	if c.over {
		c.ignored(fmt.Sprintf("longer than %d bytes, over the checkpoint cap", checkpointLineMax))
		return
	}
	data := bytes.TrimSpace(bytes.TrimLeft(c.buf, " \t")[len(checkpointPrefix):])
	switch {
	case len(data) == 0:
		c.ignored("no JSON after ::checkpoint")
		return
	case !json.Valid(data):
		c.ignored("not valid JSON: " + jsonProblem(data))
		return
	}
	started := time.Now()
	c.saving.Store(started.UnixNano())
	// The attempt may be shutting down: its last checkpoint is what the
	// next worker resumes from. The task stops retrying when the lease is
	// lost, and sends nothing once it is.
	cp, err := c.task.SaveCheckpoint(context.WithoutCancel(c.ctx), c.task.Lease.Node, json.RawMessage(bytes.Clone(data)))
	c.spent.Add(int64(time.Since(started)))
	c.saving.Store(0)
	switch {
	case err == nil:
		c.log.Debug("checkpoint_saved", "version", cp.Version)
	case fence.IsFenced(err), errors.Is(err, runner.ErrLeaseLost):
		// The runtime logged the refusal and cancelled the attempt.
		c.stopped = true
	case errors.Is(err, fence.ErrTooLarge):
		c.ignored(err.Error())
	case errors.Is(err, runner.ErrNoCheckpointStore):
		c.stopped = true
		c.ignored(err.Error())
	default:
		c.log.Warn("checkpoint_failed", "err", err)
	}
}

// ignored logs a ::checkpoint line that was not saved and why.
func (c *checkpointLines) ignored(reason string) {
	c.log.Warn("checkpoint_line_ignored", "reason", reason)
}

// jsonProblem says what is wrong with data, which is not valid JSON.
func jsonProblem(data []byte) string {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err.Error()
	}
	return "invalid"
}

// spentBy is the time spent saving until now, the save under way included.
func (c *checkpointLines) spentBy(now time.Time) time.Duration {
	d := time.Duration(c.spent.Load())
	if s := c.saving.Load(); s != 0 {
		d += now.Sub(time.Unix(0, s))
	}
	return d
}

// drainTimeout closes the channel it returns once the stdout reader has
// spent d from now outside checkpoint saves, or checkpointDrain in all;
// it never closes it once done closes. A command's last lines wait behind
// the saves of the ::checkpoint lines before them; they are not cut off
// because Redis was slow.
func (c *checkpointLines) drainTimeout(d time.Duration, done <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	start := time.Now()
	base := c.spentBy(start)
	go func() {
		deadline := start.Add(d)
		for {
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
			}
			now := time.Now()
			next := start.Add(min(d+c.spentBy(now)-base, checkpointDrain))
			if !now.Before(next) {
				close(out)
				return
			}
			deadline = next
		}
	}()
	return out
}
