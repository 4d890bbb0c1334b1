package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/batonrun/baton/fence"
)

// Error is a refusal worded for the person who asked: what happened to
// which run and what to do next. The store's sentinels name the package
// ("fence: run done"), not the problem; the Client turns each refusal it
// returns into an Error, and the CLI prints and the HTTP API answers its
// message as it is, so every surface says the same words. errors.Is and
// errors.As still find the sentinel and the store's error beneath.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Operations whose refusals explain words.
const (
	opSubmit = "submit"
	opCancel = "cancel"
	opRetry  = "retry"
	opResume = "resume"
	opDelete = "delete"
	opRead   = "read"
)

// explain words a refusal of op on run (node: the node a resume names;
// thread: a submit's thread) the one way every surface says it. Any other
// error (Redis, the network, bad input naming its field) is returned as
// it is. It reads the run's status when the words need it.
func (c *Client) explain(ctx context.Context, op, run, node, thread string, err error) error {
	if err == nil || !fence.IsRefused(err) {
		return err
	}
	var ue *Error
	if errors.As(err, &ue) {
		return err
	}
	status := func() string {
		if info, serr := c.store.GetRun(ctx, run); serr == nil {
			return info.Status
		}
		return "finished"
	}
	var msg string
	var active *fence.RunActiveError
	var open *fence.OpenWaitError
	switch {
	case errors.Is(err, fence.ErrNotFound) && run == "" && thread != "":
		msg = fmt.Sprintf("thread %s not found", thread)
	case errors.Is(err, fence.ErrUnknownNode) && node != "":
		msg = fmt.Sprintf("run %s has no node %s", run, node)
	case errors.Is(err, fence.ErrNotFound) && node != "" && op == opResume:
		msg = fmt.Sprintf("run %s or its node %s not found", run, node)
	case errors.Is(err, fence.ErrNotFound):
		msg = fmt.Sprintf("run %s not found", run)
	case errors.Is(err, fence.ErrRunDone) && op == opCancel:
		msg = fmt.Sprintf("run %s already %s; nothing to cancel", run, status())
	case errors.Is(err, fence.ErrRunDone) && errors.Is(err, fence.ErrRunCancelled) && op == opResume:
		msg = fmt.Sprintf("run %s was cancelled; nothing to resume", run)
	case errors.Is(err, fence.ErrRunDone) && op == opResume:
		msg = fmt.Sprintf("run %s is %s; nothing to resume", run, status())
	case errors.Is(err, fence.ErrRunDone):
		msg = fmt.Sprintf("run %s has ended (%s)", run, status())
	case errors.Is(err, fence.ErrNotWaiting):
		msg = fmt.Sprintf("node %s of run %s is not waiting for a resume (or not on that wait)", node, run)
	case errors.Is(err, fence.ErrThreadBusy):
		by := ""
		if ti, terr := c.store.Thread(ctx, thread); terr == nil && ti.Active != "" {
			by = " with run " + ti.Active
		}
		msg = fmt.Sprintf("thread %s is busy%s; submit with multitask enqueue (wait), interrupt or rollback (replace it), or once it has ended", thread, by)
	case errors.Is(err, fence.ErrRunConflict) && !strings.Contains(err.Error(), "thread "):
		msg = fmt.Sprintf("run %s exists with a different spec; submit the new one under another id", run)
	case errors.As(err, &open):
		msg = fmt.Sprintf("run %s is RUNNING and its node %s waits for a resume (wait_id %s); resume it (enqueue resume %s %s) or cancel the run, then retry",
			run, open.Node, open.WaitID, run, open.Node)
	case errors.Is(err, fence.ErrNotRetryable):
		msg = fmt.Sprintf("run %s is %s; only a FAILED or CANCELLED run can be retried", run, status())
	case errors.Is(err, fence.ErrNotActiveRun) && op == opRetry:
		msg = fmt.Sprintf("run %s can no longer be retried: its thread has started another run since", run)
	case errors.As(err, &active):
		msg = fmt.Sprintf("run %s is %s; cancel it first (enqueue cancel %s), then delete it", run, active.Status, run)
	default:
		// A refusal with no words of its own here: the store's message
		// without the package's name.
		msg = strings.ReplaceAll(err.Error(), "fence: ", "")
	}
	return &Error{Msg: msg, Err: err}
}
