package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/batonrun/baton/fence"
)

// pause pauses a queue: no runner starts a node of it until unpause.
func (a *app) pause(ctx context.Context, args []string) error {
	return a.setPaused(ctx, "pause", args, true)
}

// unpause resumes a paused queue.
func (a *app) unpause(ctx context.Context, args []string) error {
	return a.setPaused(ctx, "unpause", args, false)
}

func (a *app) setPaused(ctx context.Context, name string, args []string, pause bool) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 0:
		return usagef("missing QUEUE")
	case 1:
	default:
		return usagef("unexpected argument %q", pos[1])
	}
	queue := pos[0]
	if err := fence.ValidateID("queue", queue); err != nil {
		return badInput(err)
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	var changed bool
	if pause {
		changed, err = cl.PauseQueue(ctx, queue)
	} else {
		changed, err = cl.UnpauseQueue(ctx, queue)
	}
	if err != nil {
		return err
	}
	switch {
	case pause && !changed:
		fmt.Fprintf(a.stderr, "enqueue: queue %s was paused already\n", queue)
	case !pause && !changed:
		fmt.Fprintf(a.stderr, "enqueue: queue %s was not paused\n", queue)
	}
	word := "paused"
	if !pause {
		word = "resumed"
	}
	_, err = fmt.Fprintf(a.stdout, "queue %s %s\n", queue, word)
	return err
}
