package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
)

// streamLine is one entry as `stream --json` prints it.
type streamLine struct {
	ID      string     `json:"id"`
	Event   string     `json:"event"`
	Data    jsonOrNull `json:"data"`
	Node    string     `json:"node"`
	Attempt int64      `json:"attempt"`
}

// jsonOrNull is an entry's data, printed as stored (JSON on one line).
type jsonOrNull []byte

func (j jsonOrNull) MarshalJSON() ([]byte, error) {
	if len(j) == 0 {
		return []byte("null"), nil
	}
	return j, nil
}

const streamHelp = "Print what the run's attempts stream (LangGraph's stream modes: values, updates,\n" +
	"messages, custom, ...), oldest first, then live until the run has ended and\n" +
	"every chunk is printed: one line per chunk, \"ID EVENT DATA\". An entry of\n" +
	"event metadata ({\"run_id\", \"attempt\"}) marks where each attempt starts: after\n" +
	"a takeover the super-step it re-runs is printed again. An unknown run is exit 1."

const streamFlags = "  --after ID  print the chunks after this stream id (-1: from the start,\n" +
	"              the default); resumes a stream cut off\n" +
	"  --json      one JSON object per line: id, event, data (the chunk's JSON),\n" +
	"              node, attempt\n"

// stream prints a run's stream, following it until the run has ended.
func (a *app) stream(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	after := fs.String("after", "", "")
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	if !fence.ValidStreamID(*after) {
		return usagef("--after %q: want a stream id such as 1700000000000-0, or -1 for the start", *after)
	}
	c, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	o := outage{log: a.log}
	last := *after
	var f *client.StreamFollower
	for {
		err = nil
		if f == nil {
			f, err = c.FollowStream(ctx, run, last)
		}
		var es []fence.StreamEntry
		if err == nil {
			es, err = f.Next(ctx)
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			if err := o.failed(ctx, err); err != nil {
				return a.notFound(run, err)
			}
			f = nil // start again after the last entry printed
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		o.ok()
		for _, e := range es {
			if *asJSON {
				err = writeJSON(a.stdout, streamLine{ID: e.ID, Event: e.Event, Data: jsonOrNull(e.Data), Node: e.Node, Attempt: e.Attempt})
			} else {
				_, err = fmt.Fprintf(a.stdout, "%s %s %s\n", e.ID, e.Event, e.Data)
			}
			if err != nil {
				return err
			}
			last = e.ID
		}
	}
}
