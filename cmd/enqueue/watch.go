package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
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

// watch shows a run until it ends, redrawing when its events say
// something changed (a blocking read of the run's stream, or the admin
// server's event stream with --api), at most every --interval, and at
// least every second so the elapsed time moves. Its exit status is the
// run's outcome: 0 for SUCCEEDED, 1 for anything else.
func (a *app) watch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	interval := fs.Duration("interval", 250*time.Millisecond, "")
	api := fs.String("api", a.cfg.APIURL, "")
	run, err := runArg(fs, args)
	if err != nil {
		return err
	}
	if err := checkInterval(*interval); err != nil {
		return err
	}
	src, err := a.openSource(ctx, *api)
	if err != nil {
		return err
	}
	defer src.close()

	var v view = &lineView{w: a.stdout, seen: map[string]string{}}
	if a.tty {
		v = newTableView(a.stdout, a.termSize)
	}
	defer v.close()
	const idleRedraw = time.Second
	var (
		f        feed
		o        = outage{log: a.log}
		lastShow time.Time
		dirty    = true // events came since the last redraw
		ended    bool   // the feed has returned every event up to the run's end
	)
	for {
		if ended || (dirty && time.Since(lastShow) >= *interval) || time.Since(lastShow) >= idleRedraw {
			info, err := src.status(ctx, run)
			if err != nil {
				if err := o.failed(ctx, err); err != nil {
					return a.notFound(run, err)
				}
				if err := sleep(ctx, *interval); err != nil {
					return err
				}
				continue
			}
			o.ok()
			if err := v.show(info); err != nil {
				return err
			}
			lastShow, dirty = time.Now(), false
			if ended || terminal(info.Status) && f == nil {
				if info.Status == "SUCCEEDED" {
					return nil
				}
				return fmt.Errorf("run %s ended %s", run, info.Status)
			}
		}
		err = nil
		if f == nil {
			f, err = src.follow(ctx, run, *interval)
		}
		var evs []fence.Event
		if err == nil {
			evs, err = f.Next(ctx)
		}
		switch {
		case errEnded(err):
			ended = true
		case err != nil:
			if err := o.failed(ctx, err); err != nil {
				return a.notFound(run, err)
			}
			if err := sleep(ctx, *interval); err != nil {
				return err
			}
		case len(evs) > 0:
			dirty = true
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
// A frame never has more lines than the terminal has rows, nor a line
// wider than it: moving the cursor back over the last frame only works
// when all of it is still on the screen, one screen line per line. A run
// taller than the terminal shows the nodes that matter most (running,
// then failed, ready, blocked, succeeded) and counts the rest.
type tableView struct {
	w     io.Writer
	size  func() (rows, cols int) // the terminal's size; 0 when unknown
	lines int                     // height of the last frame, to move back over it
}

func newTableView(w io.Writer, size func() (rows, cols int)) *tableView {
	io.WriteString(w, "\x1b[?25l") // hide the cursor while redrawing
	return &tableView{w: w, size: size}
}

// stateRank orders node states by how much a person watching wants to
// see them when not all fit.
var stateRank = map[string]int{"RUNNING": 0, "FAILED": 1, "READY": 2, "CANCELLED": 3, "BLOCKED": 4, "SUCCEEDED": 5}

func (v *tableView) show(info *fence.RunInfo) error {
	rows, cols := v.size()
	if rows <= 0 {
		rows = 24
	}
	var frame bytes.Buffer
	done := 0
	counts := map[string]int{}
	for _, n := range info.Nodes {
		counts[n.State]++
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
	// The last row stays free: a frame that filled the screen would
	// scroll it by one when the cursor lands below it.
	nodes := info.Nodes
	room := rows - 3 // title, column header, and the free last row
	var rest []fence.NodeInfo
	if len(nodes) > room {
		room = max(room-1, 0) // one row says what is left out
		nodes = slices.Clone(nodes)
		slices.SortStableFunc(nodes, func(a, b fence.NodeInfo) int { return stateRank[a.State] - stateRank[b.State] })
		nodes, rest = nodes[:room], nodes[room:]
	}
	tw := tabwriter.NewWriter(&frame, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tPROGRESS\tATTEMPT\tEPOCH\tOWNER\tERROR")
	for _, n := range nodes {
		p := n.Progress
		if n.State == "SUCCEEDED" {
			p = 100
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %3d%%\t%s\t%d\t%s\t%s\n", n.ID, n.State, bar(p, 20), p, attempts(n),
			n.Epoch, orDash(oneLine(n.Owner, 32)), orDash(oneLine(n.Error, 60)))
	}
	tw.Flush()
	if len(rest) > 0 {
		left := map[string]int{}
		for _, n := range rest {
			left[n.State]++
		}
		var parts []string
		for _, st := range []string{"RUNNING", "FAILED", "READY", "CANCELLED", "BLOCKED", "SUCCEEDED"} {
			if left[st] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", left[st], st))
			}
		}
		fmt.Fprintf(&frame, "... %d more nodes: %s\n", len(rest), strings.Join(parts, ", "))
	}

	var out bytes.Buffer
	if v.lines > 0 {
		fmt.Fprintf(&out, "\r\x1b[%dA", v.lines) // back to the first line of the last frame
	}
	out.WriteString("\x1b[J") // clear it and whatever is below
	v.lines = 0
	for line := range strings.Lines(frame.String()) {
		out.WriteString(clip(strings.TrimSuffix(line, "\n"), cols))
		out.WriteString("\n")
		v.lines++
	}
	_, err := v.w.Write(out.Bytes())
	return err
}

// clip cuts s to cols-1 runes (a line as wide as the terminal wraps on
// some terminals); cols <= 0 leaves it whole. Ids are ASCII; a rune is
// taken as one column.
func clip(s string, cols int) string {
	if cols <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) < cols {
		return s
	}
	return string(r[:max(cols-1, 0)])
}

func (v *tableView) close() { io.WriteString(v.w, "\x1b[?25h") }

// bar draws p percent (clamped to 0..100) in width cells.
func bar(p, width int) string {
	p = min(max(p, 0), 100)
	full := p * width / 100
	return "[" + strings.Repeat("#", full) + strings.Repeat("-", width-full) + "]"
}
