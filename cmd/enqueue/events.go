package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// eventPage is how many events one read asks for.
const eventPage = 1000

// eventLine is one event as `events --json` prints it. Every key is always
// present, so scripts need no defaults; the type's other fields stay under
// details, as the strings the store recorded (but a parked event's
// request, given as the JSON it is), so they can never collide with these
// keys.
type eventLine struct {
	ID      string         `json:"id"` // stream id, increasing
	Type    string         `json:"type"`
	Node    string         `json:"node"` // "" for run-level events
	Epoch   int64          `json:"epoch"`
	Worker  string         `json:"worker"`
	At      string         `json:"at"` // RFC 3339 with nanoseconds, UTC
	Details map[string]any `json:"details"`
}

// events prints a run's events; with --follow it reads them as they are
// appended (a blocking read of the run's stream in Redis, or the admin
// server's event stream with --api) until the run has ended and every
// event up to its end is printed.
func (a *app) events(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	follow := fs.Bool("follow", false, "")
	interval := fs.Duration("interval", 200*time.Millisecond, "")
	api := fs.String("api", a.cfg.APIURL, "")
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	if err := checkInterval(*interval); err != nil {
		return err
	}
	write := writeEventText
	if *asJSON {
		write = writeEventJSON
	}
	if *follow {
		return a.followEvents(ctx, run, *api, *interval, write)
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	after := ""
	for {
		evs, err := client.Events(ctx, run, after, eventPage)
		if err != nil {
			return a.notFound(run, err)
		}
		for _, e := range evs {
			if err := write(a.stdout, e); err != nil {
				return err
			}
			after = e.ID
		}
		if len(evs) < eventPage {
			return nil
		}
	}
}

// followWait bounds one blocking read of events --follow.
const followWait = 5 * time.Second

// followEvents prints events as they come until the run has ended. A
// failed read is retried every retry (the same event is never printed
// twice: the feed resumes after the last one) until maxOutage.
func (a *app) followEvents(ctx context.Context, run, api string, retry time.Duration, write func(io.Writer, fence.Event) error) error {
	src, err := a.openSource(ctx, api)
	if err != nil {
		return err
	}
	defer src.close()
	o := outage{log: a.log}
	var f feed
	for {
		err = nil
		if f == nil {
			f, err = src.follow(ctx, run, followWait)
		}
		var evs []fence.Event
		if err == nil {
			evs, err = f.Next(ctx)
		}
		switch {
		case errEnded(err):
			return nil
		case err != nil:
			if err := o.failed(ctx, err); err != nil {
				return a.notFound(run, err)
			}
			if err := sleep(ctx, retry); err != nil {
				return err
			}
			continue
		}
		o.ok()
		for _, e := range evs {
			if err := write(a.stdout, e); err != nil {
				return err
			}
		}
	}
}

func writeEventJSON(w io.Writer, e fence.Event) error {
	return writeJSON(w, eventLine{ID: e.ID, Type: e.Type, Node: e.Node, Epoch: e.Epoch, Worker: e.Worker,
		At: e.At.UTC().Format(time.RFC3339Nano), Details: e.DetailsJSON()})
}

// writeEventText prints one timeline line:
//
//	2025-06-01T12:00:00.123Z  claimed          build@2   worker=w1  attempt=2 prev_owner=w0
func writeEventText(w io.Writer, e fence.Event) error {
	target := "run"
	if e.Node != "" {
		target = e.Node + "@" + strconv.FormatInt(e.Epoch, 10)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-16s %-20s", e.At.UTC().Format(eventTimeLayout), oneLine(e.Type, 40), target)
	if e.Worker != "" {
		fmt.Fprintf(&b, "  worker=%s", field(e.Worker))
	}
	for _, k := range slices.Sorted(maps.Keys(e.Details)) {
		fmt.Fprintf(&b, "  %s=%s", oneLine(k, 40), field(humanDetail(k, e.Details[k])))
	}
	_, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	return err
}

// eventTimeLayout is RFC 3339 with milliseconds, the resolution the store
// keeps.
const eventTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// humanDetail turns the details the scripts record in epoch milliseconds
// into what a person reads: instants (lease_until, ready_at) as RFC 3339
// times, spans (anything ending in _ms) as durations. Values that do not
// parse are printed as stored. `events --json` keeps the stored values.
func humanDetail(k, v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return v
	}
	switch {
	case k == "lease_until" || k == "ready_at" || k == "start_at":
		return time.UnixMilli(n).UTC().Format(eventTimeLayout)
	case strings.HasSuffix(k, "_ms"):
		return (time.Duration(n) * time.Millisecond).String()
	}
	return v
}

// field is a value for a key=value pair: one line, quoted if it has spaces.
func field(v string) string {
	v = oneLine(v, 200)
	if v == "" || strings.ContainsAny(v, " \"=") {
		return strconv.Quote(v)
	}
	return v
}
