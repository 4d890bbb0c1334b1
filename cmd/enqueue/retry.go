package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/batonrun/baton/fence"
)

// retry re-runs a FAILED or CANCELLED run from its failed and cancelled
// nodes and prints the run's status (RUNNING) alone on stdout.
func (a *app) retry(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("retry", flag.ContinueOnError)
	id := fs.String("id", "", "")
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	if *id != "" {
		if err := fence.ValidateID("--id", *id); err != nil {
			return badInput(err)
		}
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := client.Retry(ctx, run, *id)
	switch {
	case errors.Is(err, fence.ErrNotRetryable), errors.Is(err, fence.ErrNotActiveRun):
		return err // worded by the client: a run still waiting names its node
	case err != nil && !fence.IsRefused(err) && res.Status != "":
		// stored; only the enqueue failed: the sweeper delivers
		fmt.Fprintf(a.stderr, "enqueue: %v\n", err)
	case err != nil:
		return a.notFound(run, err)
	}
	switch {
	case res.AlreadyRunning:
		fmt.Fprintf(a.stderr, "enqueue: run %s is already running; nothing to retry\n", run)
	case res.Replay:
		fmt.Fprintf(a.stderr, "enqueue: run %s was retried by this request already\n", run)
	default:
		fmt.Fprintf(a.stderr, "enqueue: run %s retried; %d node(s) ready\n", run, len(res.Ready))
	}
	_, err = fmt.Fprintln(a.stdout, res.Status)
	return err
}
