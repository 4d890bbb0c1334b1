package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// The run page, its live fragment, a node's details and the cancel button.

type runData struct {
	Run       *fence.RunInfo
	TraceURL  string // the run's trace in a tracing UI (Config.TraceURL)
	Graph     graph
	Events    []eventRow
	More      bool // the timeline was cut at uiMaxEvents
	Active    bool // the page keeps polling
	Done      int  // nodes ended, whatever their outcome
	Succeeded int
	// Bar is the summary's bar: a segment per ended outcome, so a
	// cancelled or failed run does not read as a full green bar.
	Bar     []barSegment
	Counts  []stateCount
	Cancel  bool // a cancel can still change something
	Started bool // the run's StartAt has passed (on Redis's clock)
	// Paused lists the paused queues its READY nodes are held in.
	Paused   []string
	Thread   string
	Refused  int // stale writes refused
	Takeover int
}

// barSegment is drawn as an SVG rect: the page's CSP allows no inline
// style.
type barSegment struct {
	State string
	X, W  string // percentages of the bar
}

type stateCount struct {
	State string
	N     int
}

type eventRow struct {
	fence.Event
	Offset string // since the first event
	Mark   string // "takeover", "heartbeat_lost", "stale_rejected" or ""
	Info   string // the details, key=value
}

func (u *ui) loadRun(ctx context.Context, id string) (runData, error) {
	if err := fence.ValidateID("run id", id); err != nil {
		return runData{}, err
	}
	info, err := u.client.Status(ctx, id)
	if err != nil {
		return runData{}, err
	}
	evs, err := u.client.Events(ctx, id, "", uiMaxEvents+1)
	if err != nil {
		return runData{}, err
	}
	d := runData{Run: info, Graph: layoutDAG(info.Nodes), Thread: cmp.Or(info.Thread, info.ID)}
	if u.traceURL != "" && info.TraceID != "" {
		d.TraceURL = strings.ReplaceAll(u.traceURL, "{trace_id}", info.TraceID)
	}
	if len(evs) > uiMaxEvents {
		evs, d.More = evs[:uiMaxEvents], true
	}
	switch info.Status {
	case "SUCCEEDED", "FAILED", "CANCELLED":
	default:
		d.Active, d.Cancel = true, !info.Cancelled
	}
	counts := map[string]int{}
	for _, n := range info.Nodes {
		counts[n.State]++
		switch n.State {
		case "SUCCEEDED", "FAILED", "CANCELLED":
			d.Done++
		}
	}
	d.Succeeded = counts["SUCCEEDED"]
	for _, s := range []string{"BLOCKED", "READY", "WAITING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"} {
		if counts[s] > 0 {
			d.Counts = append(d.Counts, stateCount{s, counts[s]})
		}
	}
	x := 0.0
	for _, s := range []string{"SUCCEEDED", "FAILED", "CANCELLED"} {
		if counts[s] > 0 {
			w := 100 * float64(counts[s]) / float64(len(info.Nodes))
			d.Bar = append(d.Bar, barSegment{s, pct(x), pct(w)})
			x += w
		}
	}
	now, err := u.rdb.Time(ctx).Result()
	if err != nil {
		return runData{}, err
	}
	d.Started = info.StartAt != nil && !info.StartAt.After(now)
	var ready []string
	for _, n := range info.Nodes {
		if q := cmp.Or(n.Queue, "default"); n.State == "READY" && !slices.Contains(ready, q) {
			ready = append(ready, q)
		}
	}
	if len(ready) > 0 {
		if d.Paused, err = u.client.PausedQueues(ctx, ready); err != nil {
			return runData{}, err
		}
	}
	for i := range d.Graph.Nodes {
		d.Graph.Nodes[i].Note = nodeNote(d.Graph.Nodes[i].NodeInfo, now, d.Paused)
	}
	d.Events = eventRows(evs)
	for _, e := range d.Events {
		switch e.Mark {
		case "takeover":
			d.Takeover++
		case "stale_rejected":
			d.Refused++
		}
	}
	return d, nil
}

func pct(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "%" }

// nodeNote is the short line a READY node's box shows where an owner
// would be: when it becomes due, or why nothing runs it (its queue is
// among paused, or no runner serves it).
func nodeNote(n fence.NodeInfo, now time.Time, paused []string) string {
	switch {
	case n.State != "READY":
		return ""
	case n.ReadyAt != nil && n.ReadyAt.After(now):
		return "due " + n.ReadyAt.Format("15:04:05 MST")
	case slices.Contains(paused, cmp.Or(n.Queue, "default")):
		return "queue " + cmp.Or(n.Queue, "default") + " paused"
	case n.Waiting != "":
		return cut(strings.TrimPrefix(n.Waiting, "waiting: "), 30)
	}
	return ""
}

func eventRows(evs []fence.Event) []eventRow {
	out := make([]eventRow, len(evs))
	for i, e := range evs {
		row := eventRow{Event: e}
		if len(evs) > 0 {
			row.Offset = "+" + strconv.FormatFloat(e.At.Sub(evs[0].At).Seconds(), 'f', 3, 64) + "s"
		}
		switch e.Type {
		case "takeover", "heartbeat_lost", "stale_rejected":
			row.Mark = e.Type
		}
		keys := make([]string, 0, len(e.Details))
		for k := range e.Details {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(k + "=" + cut(detailValue(k, e.Details[k]), 120))
		}
		row.Info = b.String()
		out[i] = row
	}
	return out
}

func (u *ui) run(w http.ResponseWriter, r *http.Request) {
	d, err := u.loadRun(r.Context(), r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "run", "page", page{Title: "Run " + d.Run.ID, Nav: "runs", Data: d})
}

// runLive is the part of the run page that changes, which the page's
// script fetches every second while the run is active.
func (u *ui) runLive(w http.ResponseWriter, r *http.Request) {
	d, err := u.loadRun(r.Context(), r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "run", "live", page{Data: d})
}

// ---- one node

type nodeData struct {
	Run         string
	Thread      string
	Node        fence.NodeInfo
	Input       string
	Result      string
	Attempts    []attemptRow
	Checkpoints []eventRow
	Events      []eventRow
	Used        int64 // attempts that count against max_attempts
}

type attemptRow struct {
	Attempt string
	Epoch   int64
	Worker  string
	How     string // claimed, takeover, continued
	At      time.Time
	Outcome string // its last event: committed, failed, released, ...
	Mark    string
	Detail  string
}

func (u *ui) node(w http.ResponseWriter, r *http.Request) {
	id, nodeID := r.PathValue("id"), r.PathValue("node")
	if err := errors.Join(fence.ValidateID("run id", id), fence.ValidateID("node id", nodeID)); err != nil {
		u.fail(w, r, err)
		return
	}
	info, err := u.client.Status(r.Context(), id)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	i := slices.IndexFunc(info.Nodes, func(n fence.NodeInfo) bool { return n.ID == nodeID })
	if i < 0 {
		u.fail(w, r, fmt.Errorf("node %s/%s: %w", id, nodeID, fence.ErrNotFound))
		return
	}
	d := nodeData{Run: id, Thread: cmp.Or(info.Thread, info.ID), Node: info.Nodes[i]}
	d.Used = d.Node.Attempt - d.Node.Releases
	in, err := u.client.Store().NodeInput(r.Context(), id, nodeID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	// The input and the result are shown as the redaction of both kinds
	// leaves them (redact.go); the error, free text, by value only.
	d.Input = prettyJSON(u.secrets.JSON(redact(in)))
	d.Result = prettyJSON(u.secrets.JSON(redact(d.Node.Result)))
	d.Node.Error = u.secrets.String(d.Node.Error)
	evs, err := u.client.Events(r.Context(), id, "", 10*uiMaxEvents)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	var mine []fence.Event
	for _, e := range evs {
		if e.Node == nodeID {
			mine = append(mine, e)
		}
	}
	rows := eventRows(mine)
	d.Events = rows
	for _, e := range rows {
		switch e.Type {
		case "claimed", "takeover", "continued":
			d.Attempts = append(d.Attempts, attemptRow{Attempt: e.Details["attempt"], Epoch: e.Epoch,
				Worker: e.Worker, How: e.Type, At: e.At, Mark: e.Mark})
		case "checkpointed":
			d.Checkpoints = append(d.Checkpoints, e)
		case "progress", "retry_scheduled":
		default:
			// The last word on an attempt: the one of its epoch.
			for k := len(d.Attempts) - 1; k >= 0; k-- {
				if d.Attempts[k].Epoch == e.Epoch {
					if d.Attempts[k].Outcome != "" {
						d.Attempts[k].Outcome += ", "
					}
					d.Attempts[k].Outcome += e.Type
					if e.Mark != "" {
						d.Attempts[k].Mark = e.Mark
					}
					if msg := cmp.Or(e.Details["error"], e.Details["reason"]); msg != "" {
						d.Attempts[k].Detail = cut(u.secrets.String(msg), 200)
					}
					break
				}
			}
		}
	}
	u.render(w, r, http.StatusOK, "node", "node", page{Data: d})
}

// prettyJSON indents JSON for reading, cut at uiMaxInput.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		b.Reset()
		b.Write(raw)
	}
	if b.Len() > uiMaxInput {
		return string(b.Bytes()[:uiMaxInput]) + "\n… (cut at 64 KiB; the API has it all)"
	}
	return b.String()
}

// ---- cancel

func (u *ui) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := fence.ValidateID("run id", id); err != nil {
		u.fail(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	reason := cut(r.PostFormValue("reason"), maxReason)
	if _, err := u.client.Cancel(r.Context(), id, cmp.Or(reason, "cancelled from the run view")); err != nil {
		u.fail(w, r, err)
		return
	}
	u.log.Info("run_cancel_requested", "run_id", id, "via", "ui", "remote_addr", r.RemoteAddr)
	http.Redirect(w, r, "/runs/"+url.PathEscape(id), http.StatusSeeOther)
}

// resume answers a parked node's wait from the node page's form.
func (u *ui) resume(w http.ResponseWriter, r *http.Request) {
	id, node := r.PathValue("id"), r.PathValue("node")
	for _, v := range [][2]string{{"run id", id}, {"node id", node}} {
		if err := fence.ValidateID(v[0], v[1]); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxResumeBody)
	value, waitID := strings.TrimSpace(r.PostFormValue("value")), r.PostFormValue("wait_id")
	if waitID != "" {
		if err := fence.ValidateID("wait id", waitID); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	if _, err := u.client.Resume(r.Context(), id, node, waitID, json.RawMessage(cmp.Or(value, "null"))); err != nil &&
		fence.IsRefused(err) {
		u.fail(w, r, err)
		return
	}
	u.log.Info("node_resume_requested", "run_id", id, "node_id", node, "via", "ui", "remote_addr", r.RemoteAddr)
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"/nodes/"+url.PathEscape(node), http.StatusSeeOther)
}

// detailValue shows a detail recorded in epoch milliseconds as a clock
// time (lease_until, ready_at) and one in milliseconds (overdue_ms) as
// seconds, as enqueue events does; other values as stored.
func detailValue(k, v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return v
	case (k == "lease_until" || strings.HasSuffix(k, "_at")) && n > 1e12:
		return time.UnixMilli(n).Format("15:04:05.000")
	case strings.HasSuffix(k, "_ms"):
		return strconv.FormatFloat(float64(n)/1000, 'f', 3, 64) + "s"
	}
	return v
}
