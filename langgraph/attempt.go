package langgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// wait follows the attempt until the worker reports its outcome, sending
// a cancel (or, on shutdown, a stop at the end of the super-step) when the
// attempt's context ends.
func (k *Kind) wait(ctx context.Context, t *runner.Task, pr *process, ch chan message, graph string) (json.RawMessage, error) {
	done := ctx.Done()
	var gaveUp <-chan time.Time
	var pending *message
	var refused error // a chunk the store refused: the claim is gone
	var bad error     // a chunk the store cannot take (too large, not JSON)
	for {
		var m message
		if pending != nil {
			m, pending = *pending, nil
		} else {
			select {
			case m = <-ch:
			case <-done:
				done = nil
				cause := context.Cause(ctx)
				if errors.Is(cause, runner.ErrShutdown) {
					_ = pr.send(message{Type: "stop", ID: t.Lease.ClaimID})
					continue
				}
				_ = pr.send(message{Type: "cancel", ID: t.Lease.ClaimID, Reason: cause.Error()})
				timer := time.NewTimer(k.opts.CancelWait)
				defer timer.Stop()
				gaveUp = timer.C
				continue
			case <-gaveUp:
				return nil, fmt.Errorf("graph %s: the worker did not end the cancelled attempt within %s: %w",
					graph, k.opts.CancelWait, context.Cause(ctx))
			case <-pr.exited:
				select {
				case m = <-ch: // its last words came before its end
					pending = &m
					continue
				default:
				}
				return nil, fmt.Errorf("graph %s: the graph worker process (pid %d) ended during the attempt (%v), "+
					"which is retried: %s", graph, pr.pid, pr.err, pr.stderrTail())
			}
		}
		if m.Type == "chunk" {
			var err error
			pending, err = k.stream(ctx, t, ch, m)
			switch {
			case err == nil || refused != nil || bad != nil:
			case fence.IsFenced(err):
				refused = err
				_ = pr.send(message{Type: "cancel", ID: t.Lease.ClaimID, Reason: "stream refused: " + err.Error()})
			default:
				bad = fmt.Errorf("graph %s: a stream chunk was refused: %w", graph, err)
				_ = pr.send(message{Type: "cancel", ID: t.Lease.ClaimID, Reason: bad.Error()})
			}
			continue
		}
		if bad != nil && m.Type != "lost" {
			// Whatever the graph did after, its stream is not what it
			// yielded: the node fails, saying which chunk was refused.
			return nil, runner.Permanent(bad)
		}
		switch m.Type {
		case "done":
			return m.Result, nil
		case "interrupt":
			return nil, runner.Park(runner.Wait{Request: m.Request})
		case "error":
			err := fmt.Errorf("graph %s: %s\n%s", graph, m.Error, strings.TrimSpace(m.Traceback))
			if m.Permanent {
				return nil, runner.Permanent(err)
			}
			return nil, err
		case "lost":
			return nil, lostWait(ctx, t.Lease, graph, m.Error)
		case "stopped", "cancelled":
			if refused != nil && ctx.Err() == nil {
				return nil, lostWait(ctx, t.Lease, graph, refused.Error())
			}
			if ctx.Err() == nil {
				return nil, fmt.Errorf("graph %s: the worker reports the attempt %s unasked", graph, m.Type)
			}
			return nil, fmt.Errorf("graph %s: %s: %w", graph, m.Type, context.Cause(ctx))
		default:
			k.log.Warn("graph_worker_message", "type", m.Type, "run_id", t.Lease.Run, "node_id", t.Lease.Node)
		}
	}
}

// stream writes m and the chunks queued behind it, in one call; it returns
// the first message that is not a chunk, for wait to handle, and the
// store's refusal of the batch: the claim is gone (fence.IsFenced), or a
// chunk it cannot take (fence.ErrTooLarge, fence.ErrInvalidData). Other
// errors (Redis unreachable past the retries) are logged, the batch
// dropped.
func (k *Kind) stream(ctx context.Context, t *runner.Task, ch chan message, m message) (*message, error) {
	batch := []Chunk{{Event: m.Event, Data: m.Data}}
	var next *message
drain:
	for len(batch) < 256 {
		select {
		case n := <-ch:
			if n.Type != "chunk" {
				next = &n
				break drain
			}
			batch = append(batch, Chunk{Event: n.Event, Data: n.Data})
		default:
			break drain
		}
	}
	if ctx.Err() != nil {
		return next, nil
	}
	if err := k.opts.Streamer.Stream(ctx, t, batch); err != nil {
		if fence.IsFenced(err) || errors.Is(err, fence.ErrTooLarge) || errors.Is(err, fence.ErrInvalidData) {
			return next, err
		}
		k.log.Warn("stream_failed", "run_id", t.Lease.Run, "node_id", t.Lease.Node, "chunks", len(batch), "err", err)
	}
	return next, nil
}

// lostWait waits, about one lease at most, for the runner to agree that a
// claim whose write the store refused is gone, so the attempt is recorded
// as abandoned, not failed (as the exec kind does with exit code 75).
func lostWait(ctx context.Context, l fence.Lease, graph, why string) error {
	wait := min(max(time.Until(l.Until), time.Second), 5*time.Minute)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("graph %s: %s: %w", graph, why, context.Cause(ctx))
	case <-timer.C:
		return fmt.Errorf("graph %s: %s (a write was refused, yet the runner still held the lease after %s)",
			graph, why, wait.Round(time.Millisecond))
	}
}
