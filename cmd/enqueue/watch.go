package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonrun/baton/fence"
)

// view shows successive snapshots of a run.
type view interface {
	show(info *fence.RunInfo) error
	close()
}

// watch polls a run until it ends, showing each change. Its exit status
// is the run's outcome: 0 for SUCCEEDED, 1 for anything else.
func (a *app) watch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	interval := fs.Duration("interval", 250*time.Millisecond, "")
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	if err := checkInterval(*interval); err != nil {
		return err
	}
	client, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()

	var v view = &lineView{w: a.stdout, seen: map[string]string{}}
	if a.tty {
		v = newTableView(a.stdout)
	}
	defer v.close()
	o := outage{log: a.log}
	for {
		info, err := client.Status(ctx, run)
		if err != nil {
			if err := o.failed(ctx, err); err != nil {
				return a.notFound(run, err)
			}
		} else {
			o.ok()
			if err := v.show(info); err != nil {
				return err
			}
			if terminal(info.Status) {
				if info.Status == "SUCCEEDED" {
					return nil
				}
				return fmt.Errorf("run %s ended %s", run, info.Status)
			}
		}
		if err := sleep(ctx, *interval); err != nil {
			return err
		}
	}
}

// isTerminal reports whether f is a character device, i.e. a terminal
// (and not TERM=dumb) that can take cursor movement.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// lineView prints one line per change, for logs and pipes:
//
//	2025-06-01T12:00:00.123Z  build  RUNNING  attempt 1/3  epoch 1  owner w1  40%
//	2025-06-01T12:00:02.456Z  run deploy-42  SUCCEEDED
type lineView struct {
	w      io.Writer
	status string
	seen   map[string]string // node id -> its last printed line
}

func (v *lineView) show(info *fence.RunInfo) error {
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")
	var b strings.Builder
	for _, n := range info.Nodes {
		line := fmt.Sprintf("%s  %s  attempt %s  epoch %d  owner %s  %d%%", n.ID, n.State, attempts(n),
			n.Epoch, orDash(oneLine(n.Owner, 64)), n.Progress)
		if n.Error != "" {
			line += "  error " + oneLine(n.Error, 200)
		}
		if v.seen[n.ID] != line {
			v.seen[n.ID] = line
			fmt.Fprintf(&b, "%s  %s\n", now, line)
		}
	}
	if info.Status != v.status {
		v.status = info.Status
		fmt.Fprintf(&b, "%s  run %s  %s\n", now, info.ID, info.Status)
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

func (v *lineView) close() {}

// tableView redraws a table with progress bars in place on a terminal.
type tableView struct {
	w     io.Writer
	lines int // height of the last frame, to move back over it
}

func newTableView(w io.Writer) *tableView {
	io.WriteString(w, "\x1b[?25l") // hide the cursor while redrawing
	return &tableView{w: w}
}

func (v *tableView) show(info *fence.RunInfo) error {
	var frame bytes.Buffer
	done := 0
	for _, n := range info.Nodes {
		if n.State == "SUCCEEDED" || n.State == "FAILED" || n.State == "CANCELLED" {
			done++
		}
	}
	end := time.Now()
	if info.FinishedAt != nil {
		end = *info.FinishedAt
	}
	fmt.Fprintf(&frame, "run %s  %s  %d/%d nodes done  %s\n", info.ID, info.Status, done, len(info.Nodes),
		max(end.Sub(info.CreatedAt), 0).Round(time.Second))
	tw := tabwriter.NewWriter(&frame, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tPROGRESS\tATTEMPT\tEPOCH\tOWNER\tERROR")
	for _, n := range info.Nodes {
		p := n.Progress
		if n.State == "SUCCEEDED" {
			p = 100
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %3d%%\t%s\t%d\t%s\t%s\n", n.ID, n.State, bar(p, 20), p, attempts(n),
			n.Epoch, orDash(oneLine(n.Owner, 32)), orDash(oneLine(n.Error, 60)))
	}
	tw.Flush()

	var out bytes.Buffer
	if v.lines > 0 {
		fmt.Fprintf(&out, "\r\x1b[%dA", v.lines) // back to the first line of the last frame
	}
	out.WriteString("\x1b[J") // clear it and whatever is below
	out.Write(frame.Bytes())
	v.lines = bytes.Count(frame.Bytes(), []byte("\n"))
	_, err := v.w.Write(out.Bytes())
	return err
}

func (v *tableView) close() { io.WriteString(v.w, "\x1b[?25h") }

// bar draws p percent (clamped to 0..100) in width cells.
func bar(p, width int) string {
	p = min(max(p, 0), 100)
	full := p * width / 100
	return "[" + strings.Repeat("#", full) + strings.Repeat("-", width-full) + "]"
}
