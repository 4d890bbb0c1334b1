package admin

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

//go:embed ui/*.html ui/static
var uiFiles embed.FS

// Bounds of the run view's reads.
const (
	uiRunsPerPage = 50
	uiScanLimit   = 5000 // listing entries one page of a filtered list reads at most
	uiMaxEvents   = 2000 // timeline entries shown; the API has them all
	uiMaxInput    = 64 << 10
)

// ui serves the run view and the fleet view: server-rendered pages that
// poll a fragment of themselves while something changes. It reads through
// the same runner.Client as the API.
type ui struct {
	client *runner.Client
	rdb    redis.UniversalClient // for Redis's clock
	log    *slog.Logger
	pages  map[string]*template.Template
	static http.Handler
	// hasToken: a login exists, so the header offers a logout.
	hasToken bool
	now      func() time.Time
}

func newUI(client *runner.Client, rdb redis.UniversalClient, log *slog.Logger, hasToken bool) (*ui, error) {
	u := &ui{client: client, rdb: rdb, log: log, pages: map[string]*template.Template{}, hasToken: hasToken, now: time.Now}
	for _, p := range []string{"runs", "run", "workers", "login", "node", "message"} {
		t, err := template.New(p).Funcs(uiFuncs).ParseFS(uiFiles, "ui/base.html", "ui/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("admin: template %s: %w", p, err)
		}
		u.pages[p] = t
	}
	sub, err := fs.Sub(uiFiles, "ui/static")
	if err != nil {
		return nil, err
	}
	u.static = http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	return u, nil
}

// routes adds the pages to mux, each wrapped by protect; the static files
// (stylesheet and script, nothing secret) are open so that the login page
// is styled.
func (u *ui) routes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	p := func(f http.HandlerFunc) http.Handler { return protect(f) }
	mux.Handle("GET /{$}", p(u.runs))
	mux.Handle("GET /runs", p(u.runs))
	mux.Handle("GET /runs/{id}", p(u.run))
	mux.Handle("GET /runs/{id}/live", p(u.runLive))
	mux.Handle("GET /runs/{id}/nodes/{node}", p(u.node))
	mux.Handle("POST /runs/{id}/cancel", p(u.cancel))
	mux.Handle("GET /workers", p(u.workers))
	mux.Handle("GET /workers/live", p(u.workersLive))
	mux.Handle("GET /ui/static/", cacheFor(time.Hour, u.static))
}

func cacheFor(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age="+strconv.Itoa(int(d.Seconds())))
		h.ServeHTTP(w, r)
	})
}

// page is what every template gets.
type page struct {
	Title  string
	Nav    string // the header's active entry
	Logout bool
	Bare   bool // no navigation: the login page
	Data   any
}

// render writes template name (its "page" or, for fragments, the named
// block) with code.
func (u *ui) render(w http.ResponseWriter, r *http.Request, code int, name, block string, p page) {
	p.Logout = u.hasToken && !p.Bare
	var buf bytes.Buffer
	if err := u.pages[name].ExecuteTemplate(&buf, block, p); err != nil {
		u.log.Error("ui_render_failed", "template", name, "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// fail shows an error page: 404 for an unknown run, 400 for a bad id,
// and otherwise what the API would answer.
func (u *ui) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	if code >= 500 {
		u.log.Error("ui_error", "path", r.URL.Path, "err", err)
	}
	u.render(w, r, code, "message", "page", page{Title: http.StatusText(code), Data: err.Error()})
}

// ---- the run list

type runsData struct {
	Status, Thread string
	Statuses       []string
	Runs           []runRow
	Next           string // query of the next (older) page; "" on the last
	First          string // query of the first page, when this is not it
	Scanned        bool   // the filter stopped at uiScanLimit entries
}

type runRow struct {
	fence.RunSummary
	Age     string
	Created time.Time
	Pct     int
}

func (u *ui) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := runsData{Status: strings.ToUpper(q.Get("status")), Thread: q.Get("thread"), Statuses: runStatuses}
	if d.Status != "" && !slices.Contains(runStatuses, d.Status) && d.Status != "QUEUED" {
		u.fail(w, r, fmt.Errorf("status %q: %w", d.Status, fence.ErrInvalidID))
		return
	}
	if d.Thread != "" {
		if err := fence.ValidateID("thread", d.Thread); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	offset, _ := strconv.ParseInt(q.Get("from"), 10, 64)
	offset = max(offset, 0)
	store := u.client.Store()
	pos, scanned := offset, int64(0)
	more := true
	for len(d.Runs) < uiRunsPerPage && more && scanned < uiScanLimit {
		const chunk = 200
		listed, err := store.ListRunsAt(r.Context(), pos, chunk)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		more = len(listed) == chunk
		ids := make([]string, len(listed))
		at := make(map[string]time.Time, len(listed))
		for i, l := range listed {
			ids[i], at[l.ID] = l.ID, l.SubmittedAt
		}
		sums, err := store.Summaries(r.Context(), ids)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		byID := make(map[string]fence.RunSummary, len(sums))
		for _, s := range sums {
			byID[s.ID] = s
		}
		for i, id := range ids {
			scanned++
			s, ok := byID[id]
			if !ok || (d.Status != "" && s.Status != d.Status) || (d.Thread != "" && s.Thread != d.Thread && s.ID != d.Thread) {
				continue
			}
			row := runRow{RunSummary: s, Created: at[id], Age: age(u.now().Sub(at[id]))}
			if s.Nodes > 0 {
				row.Pct = 100 * s.Done / s.Nodes
			}
			d.Runs = append(d.Runs, row)
			if len(d.Runs) == uiRunsPerPage {
				more = more || i < len(ids)-1
				pos += int64(i + 1)
				break
			}
		}
		if len(d.Runs) < uiRunsPerPage {
			pos += int64(len(ids))
		}
	}
	d.Scanned = more && scanned >= uiScanLimit && len(d.Runs) < uiRunsPerPage
	keep := url.Values{}
	if d.Status != "" {
		keep.Set("status", d.Status)
	}
	if d.Thread != "" {
		keep.Set("thread", d.Thread)
	}
	if more {
		nq := url.Values{}
		for k, v := range keep {
			nq[k] = v
		}
		nq.Set("from", strconv.FormatInt(pos, 10))
		d.Next = "?" + nq.Encode()
	}
	if offset > 0 {
		d.First = "?" + keep.Encode()
	}
	u.render(w, r, http.StatusOK, "runs", "page", page{Title: "Runs", Nav: "runs", Data: d})
}

// age says how long ago, in the largest unit that fits.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// ---- one run

type runData struct {
	Run      *fence.RunInfo
	Graph    graph
	Events   []eventRow
	More     bool // the timeline was cut at uiMaxEvents
	Active   bool // the page keeps polling
	Done     int
	Pct      int
	Counts   []stateCount
	Cancel   bool // a cancel can still change something
	Thread   string
	Refused  int // stale writes refused
	Takeover int
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
	for _, s := range []string{"BLOCKED", "READY", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"} {
		if counts[s] > 0 {
			d.Counts = append(d.Counts, stateCount{s, counts[s]})
		}
	}
	if len(info.Nodes) > 0 {
		d.Pct = 100 * d.Done / len(info.Nodes)
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
			b.WriteString(k + "=" + cut(e.Details[k], 120))
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
	d.Input = prettyJSON(in)
	d.Result = prettyJSON(d.Node.Result)
	evs, err := u.client.Events(r.Context(), id, "", 0)
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
						d.Attempts[k].Detail = cut(msg, 200)
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

// ---- template helpers

var uiFuncs = template.FuncMap{
	"lower": strings.ToLower,
	"clock": func(t time.Time) string { return t.Format("15:04:05.000") },
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"timep": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return ""
		}
		return t.Format("15:04:05.000")
	},
	"add":  func(a, b int) int { return a + b },
	"path": url.PathEscape,
	"ms": func(v float64) string {
		return strconv.FormatFloat(v, 'f', 1, 64)
	},
	"secs": func(ms int64) string {
		return strconv.FormatFloat(float64(ms)/1000, 'f', 2, 64) + "s"
	},
}
