package main

import (
	"context"
	"flag"
	"fmt"
)

// del deletes an ended run and prints what it ended as.
func (a *app) del(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	status, err := cl.Delete(ctx, run)
	if err != nil {
		return a.notFound(run, err)
	}
	_, err = fmt.Fprintf(a.stdout, "deleted %s (%s)\n", run, status)
	return err
}
