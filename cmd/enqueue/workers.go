package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// workers lists the live runners: a table for people, JSON for scripts.
func (a *app) workers(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("workers", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	list, err := client.Workers(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(a.stdout, list)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tKINDS\tQUEUES\tSTARTED\tSEEN")
	for _, w := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s ago\n", oneLine(w.ID, 64), oneLine(strings.Join(w.Kinds, ","), 120),
			oneLine(strings.Join(w.Queues, ","), 80), w.StartedAt.UTC().Format(time.RFC3339),
			time.Since(w.SeenAt).Round(time.Second))
	}
	return tw.Flush()
}
