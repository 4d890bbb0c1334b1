package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// checkpointPage is how many checkpoints one read of --all asks for.
const checkpointPage = 200

// checkpoint prints a thread's newest checkpoint in one namespace, or its
// whole history with --all (newest first).
func (a *app) checkpoint(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	ns := fs.String("ns", "", "")
	asJSON := fs.Bool("json", false, "")
	all := fs.Bool("all", false, "")
	thread, err := threadArg(fs, args)
	if err != nil {
		return err
	}
	nsGiven := false
	fs.Visit(func(f *flag.Flag) { nsGiven = nsGiven || f.Name == "ns" })
	if nsGiven {
		if err := fence.ValidateNS(*ns); err != nil {
			return badInput(err)
		}
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if !nsGiven {
		if *ns, err = a.onlyNamespace(ctx, cl, thread); err != nil {
			return err
		}
	}
	if !*all {
		cp, err := cl.LatestCheckpoint(ctx, thread, *ns)
		if err != nil {
			return a.noCheckpoint(thread, *ns, err)
		}
		if *asJSON {
			return writeJSON(a.stdout, jsonCheckpoint(*cp))
		}
		return writeCheckpoint(a.stdout, cp)
	}

	var list []fence.Checkpoint
	for before := int64(0); ; {
		page, next, err := cl.Checkpoints(ctx, thread, *ns, before, checkpointPage)
		if err != nil {
			return err
		}
		list = append(list, page...)
		if next == 0 {
			break
		}
		before = next
	}
	if len(list) == 0 {
		return a.noCheckpoint(thread, *ns, fence.ErrNoCheckpoint)
	}
	if *asJSON {
		for _, cp := range list {
			if err := writeJSON(a.stdout, jsonCheckpoint(cp)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tEPOCH\tRUN\tNODE\tWORKER\tAT\tDATA")
	for _, cp := range list {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", cp.Version, cp.Epoch, cp.Run, cp.Node,
			orDash(oneLine(cp.Worker, 64)), cp.At.UTC().Format(time.RFC3339Nano), oneLine(string(cp.Data), 80))
	}
	return tw.Flush()
}

// onlyNamespace is the thread's one checkpoint namespace. With none the
// thread has no checkpoint (exit 1); with several the caller must choose
// (exit 2).
func (a *app) onlyNamespace(ctx context.Context, cl *client.Client, thread string) (string, error) {
	names, err := cl.Namespaces(ctx, thread)
	if err != nil {
		return "", a.threadNotFound(thread, err)
	}
	switch len(names) {
	case 0:
		return "", fmt.Errorf("thread %s has no checkpoint", thread)
	case 1:
		return names[0], nil
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return "", badInput(fmt.Errorf("thread %s has checkpoints in %d namespaces (%s): choose one with --ns",
		thread, len(names), strings.Join(quoted, ", ")))
}

// noCheckpoint is the message for a namespace without checkpoints.
func (a *app) noCheckpoint(thread, ns string, err error) error {
	if !errors.Is(err, fence.ErrNoCheckpoint) {
		return err
	}
	return fmt.Errorf("thread %s ns %q: no checkpoint (redis %s, BATON_PREFIX %s)", thread, ns,
		a.cfg.Redis, a.cfg.Prefix)
}

// jsonCheckpoint is cp as `checkpoint --json` prints it: at in UTC.
func jsonCheckpoint(cp fence.Checkpoint) fence.Checkpoint {
	cp.At = cp.At.UTC()
	return cp
}

// writeCheckpoint prints who saved cp, then its data as saved.
func writeCheckpoint(w io.Writer, cp *fence.Checkpoint) error {
	fmt.Fprintf(w, "thread %s  ns %q  version %d  run %s  node %s  epoch %d  worker %s  at %s\n",
		cp.Thread, cp.NS, cp.Version, cp.Run, cp.Node, cp.Epoch, orDash(oneLine(cp.Worker, 64)),
		cp.At.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(w, "id %s  parent %s\n", cp.ID, orDash(cp.Parent))
	_, err := fmt.Fprintf(w, "%s\n", cp.Data)
	return err
}

const checkpointHelp = `Print the newest checkpoint of the thread in one namespace: who saved it
(run, node, epoch, worker, Redis time), then its data as saved. The exec
kind saves under the node's id. Without --ns, the thread's only namespace;
a thread with several needs --ns (exit 2). No checkpoint: exit 1.`

const checkpointFlags = `  --ns NS  the namespace ("" is the root one)
  --all    every checkpoint kept, newest first
  --json   one JSON object per checkpoint: {thread, ns, version, id, parent,
           data (the JSON saved), metadata, run, node, epoch, worker, at}
`
