package main

import (
	"context"
	"flag"
	"fmt"
)

// maxReasonBytes caps --reason: it is stored on the run and in its events.
const maxReasonBytes = 1024

// cancel cancels a run and prints its resulting status alone on stdout;
// what is still running is said on stderr.
func (a *app) cancel(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cancel", flag.ContinueOnError)
	reason := fs.String("reason", "", "")
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	if len(*reason) > maxReasonBytes {
		return usagef("--reason: %d bytes, at most %d", len(*reason), maxReasonBytes)
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := client.Cancel(ctx, run, *reason)
	if err != nil {
		return a.notFound(run, err) // a refusal is worded by the client, as the API says it
	}
	if res.Already {
		fmt.Fprintf(a.stderr, "enqueue: run %s was already cancelled\n", run)
	}
	if res.Running > 0 {
		fmt.Fprintf(a.stderr, "enqueue: %d node(s) still running; their workers were told and stop them at a safe point\n", res.Running)
	}
	_, err = fmt.Fprintln(a.stdout, res.RunStatus)
	return err
}
