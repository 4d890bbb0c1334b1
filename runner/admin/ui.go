package admin

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/kinds"
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

// ui serves the run view, the fleet view and the schedules page:
// server-rendered pages that poll a fragment of themselves while something
// changes. It reads through the same runner.Client as the API.
type ui struct {
	client *runner.Client
	rdb    redis.UniversalClient // for Redis's clock
	log    *slog.Logger
	pages  map[string]*template.Template
	static http.Handler
	// hasToken: a login exists, so the header offers a logout.
	hasToken bool
	now      func() time.Time
	traceURL string          // Config.TraceURL
	secrets  *kinds.Redactor // Config.Redact
}

func newUI(client *runner.Client, rdb redis.UniversalClient, log *slog.Logger, hasToken bool) (*ui, error) {
	u := &ui{client: client, rdb: rdb, log: log, pages: map[string]*template.Template{}, hasToken: hasToken, now: time.Now}
	for _, p := range []string{"runs", "run", "workers", "schedules", "login", "node", "message"} {
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
	mux.Handle("POST /runs/{id}/nodes/{node}/resume", p(u.resume))
	workers, workersLive := polled(u, "workers", "Workers", u.loadFleet)
	mux.Handle("GET /workers", p(workers))
	mux.Handle("GET /workers/live", p(workersLive))
	schedules, schedulesLive := polled(u, "schedules", "Schedules", u.loadSchedules)
	mux.Handle("GET /schedules", p(schedules))
	mux.Handle("GET /schedules/live", p(schedulesLive))
	mux.Handle("GET /ui/static/", cacheFor(time.Hour, u.static))
}

// polled returns the handlers of a page whose script polls its live
// fragment (template name's blocks "page" and "live"), both rendering
// what load reads; the page is the header's entry name.
func polled[T any](u *ui, name, title string, load func(*http.Request) (T, error)) (full, live http.HandlerFunc) {
	serve := func(block string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			d, err := load(r)
			if err != nil {
				u.fail(w, r, err)
				return
			}
			p := page{Data: d}
			if block == "page" {
				p.Title, p.Nav = title, name
			}
			u.render(w, r, http.StatusOK, name, block, p)
		}
	}
	return serve("page"), serve("live")
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
	h.Set("Content-Security-Policy", pagePolicy) // headers.go; secureHeaders set the rest
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

// ---- template helpers

// viewTime is how the views show an instant.
const viewTime = "2006-01-02 15:04:05.000 MST"

var uiFuncs = template.FuncMap{
	"lower": strings.ToLower,
	// Times read with their date and zone: a run page is read on another
	// day and from another zone than the runner's.
	"clock": func(t time.Time) string { return t.Format(viewTime) },
	"stampp": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
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
		return t.Format(viewTime)
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
