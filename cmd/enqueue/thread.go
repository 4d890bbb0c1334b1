package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/batonrun/baton/fence"
)

// thread prints a thread: its active run, the runs queued behind it, and
// the newest checkpoint version of each namespace.
func (a *app) thread(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("thread", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	thread, err := threadArg(fs, args)
	if err != nil {
		return err
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	info, err := client.Thread(ctx, thread)
	if err != nil {
		return a.threadNotFound(thread, err)
	}
	if *asJSON {
		return writeJSON(a.stdout, info)
	}
	active := "-"
	if info.Active != "" {
		active = info.Active + " (" + info.ActiveStatus + ")"
	}
	fmt.Fprintf(a.stdout, "thread %s  active %s\n", info.Thread, active)
	fmt.Fprintf(a.stdout, "queued: %s\n", orDash(strings.Join(info.Queued, ", ")))
	if len(info.Checkpoints) == 0 {
		fmt.Fprintln(a.stdout, "no checkpoints")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NS\tVERSION")
	for _, ns := range slices.Sorted(maps.Keys(info.Checkpoints)) {
		fmt.Fprintf(tw, "%s\t%d\n", strconv.Quote(ns), info.Checkpoints[ns])
	}
	return tw.Flush()
}

// threadArg parses args that hold exactly one positional argument, a
// thread id, and validates it before anything touches Redis.
func threadArg(fs *flag.FlagSet, args []string) (string, error) {
	thread, err := oneArg(fs, args, "THREAD")
	if err != nil {
		return "", err
	}
	if err := fence.ValidateID("thread", thread); err != nil {
		return "", badInput(err)
	}
	return thread, nil
}

// oneArg parses fs and returns its one positional argument, named what in
// the usage error when it is missing.
func oneArg(fs *flag.FlagSet, args []string, what string) (string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return "", err
	}
	switch len(pos) {
	case 0:
		return "", usagef("missing %s", what)
	case 1:
	default:
		return "", usagef("unexpected argument %q", pos[1])
	}
	return pos[0], nil
}

// threadNotFound is the message for a thread that does not exist, with
// the two settings that usually explain it.
func (a *app) threadNotFound(thread string, err error) error {
	if !errors.Is(err, fence.ErrNotFound) {
		return err
	}
	return fmt.Errorf("thread %s not found (redis %s, BATON_PREFIX %s)", thread, a.cfg.Redis, a.cfg.Prefix)
}
