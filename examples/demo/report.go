package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonrun/baton/fence"
)

// report prints the timeline, the run's final state and what they show.
func report(out io.Writer, o *outcome) {
	rows := timeline(o)
	fmt.Fprintf(out, "\nTimeline of run %s: its event stream in Redis, the downstream's log, and (demo) steps\n\n", o.Run.ID)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tTIME\tWORKER\tNODE\tEPOCH\tEVENT\tDETAILS")
	var t0 time.Time
	if len(rows) > 0 {
		t0 = rows[0].at
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t+%.3fs\t%s\t%s\t%s\t%s\t%s\n", r.mark, r.at.Sub(t0).Seconds(),
			r.who, r.node, r.epoch, r.event, r.details)
	}
	_ = tw.Flush()

	fmt.Fprintf(out, "\nRun %s: %s\n\n", o.Run.ID, o.Run.Status)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tKIND\tSTATE\tATTEMPT\tEPOCH\tOWNER\tRESULT")
	for _, n := range o.Run.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", n.ID, n.Kind, n.State, n.Attempt, n.Epoch, n.Owner,
			clip(string(n.Result), 72))
	}
	_ = tw.Flush()

	v := o.Victim
	deploy := nodeOf(o.Run, v.Node)
	fmt.Fprintln(out, "\nWhat this shows")
	if !o.Paused[1].IsZero() {
		fmt.Fprintf(out, "  - %s stood still for %s holding %s under epoch %d, past its %s lease.\n",
			v.Owner, o.Paused[1].Sub(o.Paused[0]).Round(time.Millisecond), v.Node, v.Epoch, leaseTTL)
	}
	if hasTakeover(o) {
		fmt.Fprintf(out, "  - Once the lease (plus grace) ran out on Redis's clock, %s claimed %s under epoch %d,\n"+
			"    redid the deploy call and committed.\n", deploy.Owner, v.Node, deploy.Epoch)
	}
	if i := slices.IndexFunc(o.Events, func(e fence.Event) bool { return isLateWrite(e, v) }); i >= 0 {
		fmt.Fprintf(out, "  - %s woke up and wrote under epoch %d (%s): the script refused it (stale_rejected);\n"+
			"    the stored result is %s's.\n", v.Owner, v.Epoch, lateWhat(o.Events[i]), cmp.Or(deployedBy(o), "nobody"))
	}
	if o.Late == http.StatusConflict {
		fmt.Fprintf(out, "  - The deploy API checks Baton-Fencing-Token: having seen epoch %d, it refuses epoch %d (409).\n",
			deploy.Epoch, v.Epoch)
	}
}

// row is one line of the timeline.
type row struct {
	at                                     time.Time
	rank                                   int // orders rows within one millisecond
	seq                                    int // position in the event stream; -1 for other rows
	mark, who, node, epoch, event, details string
}

// ranks order rows stamped with the same millisecond in the order they
// must have happened: a node is claimed, then calls out, then commits.
var ranks = map[string]int{"submitted": 0, "heartbeat_lost": 1, "takeover": 2, "claimed": 2, "progress": 3,
	"api_admitted": 4, "api_refused": 4, "(paused)": 5, "(resumed)": 5, "committed": 6, "stale_rejected": 7,
	"run_finished": 8}

// timeline merges the run's events, the downstream's calls and the demo's
// own steps in time order. The run's events keep the stream's order, which
// is the order they happened in: several share a millisecond, and their
// times (Redis's TIME in milliseconds) cannot tell them apart. The other
// rows, truncated to milliseconds to match, go in between by time, ties by
// rank.
func timeline(o *outcome) []row {
	v := o.Victim
	var rows []row
	for i, e := range o.Events {
		r := row{at: e.At, seq: i, who: cmp.Or(e.Worker, "client"), node: cmp.Or(e.Node, "-"), epoch: epoch(e.Epoch),
			event: e.Type, details: details(e)}
		switch {
		case e.Type == "heartbeat_lost" && e.Worker == v.Owner:
			r.details += "  <- no heartbeat got through; lease over"
		case e.Type == "takeover" && e.Details["prev_owner"] == v.Owner:
			r.mark = ">>"
			r.details += "  <- new owner, epoch+1"
		case isLateWrite(e, v):
			r.mark = ">>"
			r.details += "  <- the paused worker's late " + e.Details["op"] + ": refused, nothing stored"
		case e.Type == "stale_rejected" && e.Worker == v.Owner && e.Details["op"] == "heartbeat":
			r.details += "  <- its heartbeat, now that Redis is reachable: refused too"
		}
		rows = append(rows, r)
	}
	for _, c := range o.Calls {
		r := row{at: c.At.Truncate(time.Millisecond), seq: -1, who: "downstream", node: c.Token.Node,
			epoch: epoch(c.Token.Epoch), event: "api_admitted", details: "POST " + c.Path}
		if !c.Admitted() {
			r.mark, r.event = ">>", "api_refused"
			r.details += fmt.Sprintf(" -> %d, newest epoch seen %d", c.Status, c.Newest)
			if c.Token == v.Token() {
				r.details += "  <- the paused worker's token, sent again by the demo"
			}
		}
		rows = append(rows, r)
	}
	if at := o.Paused[0]; !at.IsZero() {
		rows = append(rows, row{at: at.Truncate(time.Millisecond), seq: -1, who: v.Owner, node: v.Node, epoch: epoch(v.Epoch),
			event: "(paused)", details: "(demo) Redis connection cut; handler stops the world, ignoring ctx"})
	}
	if at := o.Paused[1]; !at.IsZero() {
		rows = append(rows, row{at: at.Truncate(time.Millisecond), seq: -1, who: v.Owner, node: v.Node, epoch: epoch(v.Epoch),
			event: "(resumed)", details: "(demo) partition healed; handler returns its result"})
	}
	for i := range rows {
		rows[i].rank = ranks[rows[i].event]
	}
	return mergeRows(rows)
}

func epoch(e int64) string {
	if e == 0 {
		return "-"
	}
	return fmt.Sprintf("e%d", e)
}

// details formats an event's other fields as k=v, sorted.
func details(e fence.Event) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(e.Details)) {
		if k == "lease_until" { // an absolute ms timestamp; overdue_ms says it better
			continue
		}
		parts = append(parts, k+"="+e.Details[k])
	}
	return strings.Join(parts, " ")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func hasTakeover(o *outcome) bool {
	return slices.ContainsFunc(o.Events, func(e fence.Event) bool {
		return e.Type == "takeover" && e.Node == o.Victim.Node && e.Details["prev_owner"] == o.Victim.Owner
	})
}

// deployedBy returns the worker named in the stored deploy result.
func deployedBy(o *outcome) string {
	var res struct {
		By string `json:"deployed_by"`
	}
	_ = json.Unmarshal(nodeOf(o.Run, o.Victim.Node).Result, &res)
	return res.By
}

// verify checks what the demo promises; main exits 1 when it fails.
func verify(o *outcome) error {
	var errs []error
	if o.Run.Status != "SUCCEEDED" {
		errs = append(errs, fmt.Errorf("run %s is %s, want SUCCEEDED", o.Run.ID, o.Run.Status))
	}
	v := o.Victim
	if !hasTakeover(o) {
		errs = append(errs, fmt.Errorf("no takeover of %s from %s", v.Node, v.Owner))
	}
	if !slices.ContainsFunc(o.Events, func(e fence.Event) bool { return isLateWrite(e, v) }) {
		errs = append(errs, fmt.Errorf("%s's late write of %s under epoch %d was not rejected", v.Owner, v.Node, v.Epoch))
	}
	if by := deployedBy(o); by == "" || by == v.Owner {
		errs = append(errs, fmt.Errorf("the stored %s result is %q's, want the successor's", v.Node, by))
	}
	if o.Late != http.StatusConflict {
		errs = append(errs, fmt.Errorf("the deploy API answered the stale token with %d, want 409", o.Late))
	}
	return errors.Join(errs...)
}

// lateWhat says what the paused worker's refused write was.
func lateWhat(e fence.Event) string {
	if e.Details["op"] == "release" {
		return "it had stopped trusting its lease, so it committed nothing and handed the node back"
	}
	return "its commit, before its own timer could fence it"
}

// mergeRows orders rows (stream rows have seq >= 0, the others -1). The
// stream rows keep the stream's order, never reordered by time. Each other
// row goes right after the last stream row it must follow: one earlier
// than it, or of its millisecond and a rank not above its own; and a
// downstream call of node@epoch goes after that claim and before that
// commit, whatever the clocks say. (A single sort with mixed keys is not a
// consistent order and could put a commit before its claim.)
func mergeRows(rows []row) []row {
	var stream, other []row
	for _, r := range rows {
		if r.seq >= 0 {
			stream = append(stream, r)
		} else {
			other = append(other, r)
		}
	}
	slices.SortStableFunc(stream, func(a, b row) int { return cmp.Compare(a.seq, b.seq) })
	pos := make(map[int]int, len(other)) // other row -> the stream row it goes before
	for i, o := range other {
		p := 0
		for j, s := range stream {
			if s.at.Before(o.at) || s.at.Equal(o.at) && s.rank <= o.rank {
				p = j + 1
			}
		}
		if strings.HasPrefix(o.event, "api_") {
			for j, s := range stream {
				if s.node != o.node || s.epoch != o.epoch {
					continue
				}
				switch s.event {
				case "claimed", "takeover":
					p = max(p, j+1)
				case "committed":
					p = min(p, j)
				}
			}
		}
		pos[i] = p
	}
	idx := make([]int, len(other))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := cmp.Compare(pos[a], pos[b]); c != 0 {
			return c
		}
		if c := other[a].at.Compare(other[b].at); c != 0 {
			return c
		}
		return cmp.Compare(other[a].rank, other[b].rank)
	})
	out := make([]row, 0, len(rows))
	next := 0
	for _, i := range idx {
		out = append(out, stream[next:pos[i]]...)
		out = append(out, other[i])
		next = pos[i]
	}
	return append(out, stream[next:]...)
}
