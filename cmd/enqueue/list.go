package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// maxListLimit bounds --limit: List reads every listed run in full.
const maxListLimit = 10000

// list prints runs, newest first, optionally only those in one status or
// of one thread (a run without a thread is the thread of its own id).
func (a *app) list(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	status := fs.String("status", "", "")
	thread := fs.String("thread", "", "")
	limit := fs.Int("limit", 50, "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	*status = strings.ToUpper(*status)
	switch *status {
	case "", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED":
	default:
		return usagef("--status %q: want PENDING, RUNNING, SUCCEEDED, FAILED or CANCELLED", *status)
	}
	if *limit < 1 || *limit > maxListLimit {
		return usagef("--limit %d: want 1 to %d", *limit, maxListLimit)
	}
	if *thread != "" {
		if err := fence.ValidateID("thread", *thread); err != nil {
			return badInput(fmt.Errorf("--thread: %w", err))
		}
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	runs, err := cl.ListRuns(ctx, client.ListOptions{Status: *status, Thread: *thread, Limit: *limit})
	if err != nil {
		return err
	}
	if *asJSON {
		if runs == nil {
			runs = []client.RunSummary{}
		}
		return writeJSON(a.stdout, runs)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tDONE\tTHREAD")
	for _, r := range runs {
		status := r.Status
		if r.Waiting > 0 {
			status += fmt.Sprintf(" (%d waiting)", r.Waiting)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\n", r.ID, status, r.Done, r.Nodes, orDash(r.Thread))
	}
	return tw.Flush()
}
