package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/batonrun/baton/fence"
)

// resume answers a parked node's wait with a JSON value and prints the
// answer the wait has (this one, or the first when it was answered before).
func (a *app) resume(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	value := fs.String("value", "null", "")
	wait := fs.String("wait", "", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want RUN NODE, got %d argument(s)", len(pos))
	}
	run, node := pos[0], pos[1]
	for _, v := range [][2]string{{"run id", run}, {"node id", node}} {
		if err := fence.ValidateID(v[0], v[1]); err != nil {
			return badInput(err)
		}
	}
	if *wait != "" {
		if err := fence.ValidateID("--wait", *wait); err != nil {
			return badInput(err)
		}
	}
	if !json.Valid([]byte(*value)) {
		return badInput(fmt.Errorf("--value %q: not JSON: %w", *value, fence.ErrInvalidData))
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	res, err := client.Resume(ctx, run, node, *wait, json.RawMessage(*value))
	switch {
	case errors.Is(err, fence.ErrNotWaiting), errors.Is(err, fence.ErrRunDone), errors.Is(err, fence.ErrUnknownNode):
		return err // worded by the client, as the API says it
	case errors.Is(err, fence.ErrInvalidData), errors.Is(err, fence.ErrTooLarge):
		return badInput(err)
	case err != nil && !fence.IsRefused(err) && res.Thread != "":
		fmt.Fprintf(a.stderr, "enqueue: %v\n", err) // stored; the sweeper delivers
	case err != nil:
		return a.notFound(run, err)
	}
	if res.Replay {
		fmt.Fprintf(a.stderr, "enqueue: that wait was answered already; the first answer stands\n")
	} else {
		fmt.Fprintf(a.stderr, "enqueue: node %s of run %s resumed\n", node, run)
	}
	out, _ := json.Marshal(res.Answer)
	_, err = fmt.Fprintln(a.stdout, string(out))
	return err
}
