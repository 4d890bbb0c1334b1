package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/batonrun/baton/fence"
)

// status prints one run: a table for people, fence.RunInfo as JSON for
// scripts.
func (a *app) status(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	info, err := client.Status(ctx, run)
	if err != nil {
		return a.notFound(run, err)
	}
	if *asJSON {
		return writeJSON(a.stdout, jsonSafe(info))
	}
	return writeStatus(a.stdout, info)
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// jsonSafe returns info with every node result that is not valid JSON
// turned into a JSON string, so one bad result cannot make the whole run
// unprintable.
func jsonSafe(info *fence.RunInfo) *fence.RunInfo {
	out := *info
	out.Nodes = append([]fence.NodeInfo(nil), info.Nodes...)
	for i, n := range out.Nodes {
		if len(n.Result) > 0 && !json.Valid(n.Result) {
			q, _ := json.Marshal(string(n.Result))
			out.Nodes[i].Result = q
		}
	}
	if out.Nodes == nil {
		out.Nodes = []fence.NodeInfo{}
	}
	return &out
}

// writeStatus prints the run's header and a table of its nodes.
func writeStatus(w io.Writer, info *fence.RunInfo) error {
	fmt.Fprintf(w, "run %s  %s  created %s", info.ID, info.Status, info.CreatedAt.Format(time.RFC3339))
	if info.Thread != "" {
		fmt.Fprintf(w, "  thread %s", info.Thread)
	}
	if info.Status == "QUEUED" && info.Behind != "" {
		fmt.Fprintf(w, "  behind %s", info.Behind)
	}
	if info.FinishedAt != nil {
		fmt.Fprintf(w, "  finished %s", info.FinishedAt.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	if info.Deadline != nil && !terminal(info.Status) {
		fmt.Fprintf(w, "timeout %s: what is left is cancelled at %s\n", info.Timeout, info.Deadline.Format(time.RFC3339))
	}
	if info.Cancelled {
		fmt.Fprintf(w, "cancel requested: %s\n", oneLine(info.CancelReason, 200))
	}
	for _, n := range info.Nodes {
		if n.Wait != nil {
			fmt.Fprintf(w, "waiting for a resume: node %s asks %s (enqueue resume %s %s --value JSON)\n",
				n.ID, oneLine(string(n.Wait.Request), 200), info.ID, n.ID)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tATTEMPT\tEPOCH\tOWNER\tPROGRESS\tRESULT\tERROR")
	for _, n := range info.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d%%\t%s\t%s\n", n.ID, n.State, attempts(n), n.Epoch,
			orDash(oneLine(n.Owner, 64)), n.Progress, orDash(oneLine(string(n.Result), resultWidth)),
			orDash(oneLine(cmp.Or(n.Error, n.Waiting), 120)))
	}
	return tw.Flush()
}

// resultWidth is how many characters of a node's result the table shows;
// `status --json` prints it in full.
const resultWidth = 40

// attempts is the node's attempt number, the one its events and `status
// --json` ("attempt") give its latest claim, with what counts against
// max_attempts when that differs: an attempt handed back by release (a
// shutdown's hand-off) or by a park is not counted. "2/3": attempt 2 of
// 3; "2 (1/3 used)": attempt 2, one of 3 used ("attempts_used" in the
// JSON). The column never reads 2/1.
func attempts(n fence.NodeInfo) string {
	used := max(n.Attempt-n.Releases, 0)
	s := strconv.FormatInt(n.Attempt, 10)
	if used == n.Attempt {
		if n.MaxAttempts > 0 {
			s += "/" + strconv.Itoa(n.MaxAttempts)
		}
		return s
	}
	s += " (" + strconv.FormatInt(used, 10)
	if n.MaxAttempts > 0 {
		s += "/" + strconv.Itoa(n.MaxAttempts)
	}
	return s + " used)"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine makes text stored by workers safe for a terminal: control
// characters (escape sequences, newlines) become spaces or are dropped, and
// the result is cut to max runes.
func oneLine(s string, max int) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			r = ' '
		case unicode.IsControl(r) || r == unicode.ReplacementChar:
			continue
		}
		if n == max {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// terminal reports whether a run status is final: SUCCEEDED, FAILED or
// CANCELLED. A QUEUED run is not: it waits for its thread.
func terminal(status string) bool {
	return status == "SUCCEEDED" || status == "FAILED" || status == "CANCELLED"
}
