package admin

import (
	"bytes"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// monitorBar links the Asynq UI back to the run, fleet and schedules
// views. asynqmon is a prebuilt React bundle whose index page it renders
// itself, so the link bar is injected into that page's HTML on the way
// out: only pages (paths without a file extension, outside its JSON API)
// are buffered and rewritten; its scripts, styles and API answers pass
// through untouched.
const monitorBar = `<div id="baton-bar" style="position:fixed;right:12px;bottom:12px;z-index:2147483647;` +
	`font:13px/1.4 system-ui,sans-serif;background:#1f2937;color:#e5e7eb;padding:6px 10px;border-radius:6px;` +
	`box-shadow:0 2px 8px rgba(0,0,0,.3)">baton: <a href="/runs" style="color:#93c5fd">Runs</a> · ` +
	`<a href="/workers" style="color:#93c5fd">Workers</a> · <a href="/schedules" style="color:#93c5fd">Schedules</a></div>`

func withMonitorBar(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if r.Method != http.MethodGet || strings.HasPrefix(p, MonitorPath+"/api/") || path.Ext(p) != "" {
			next.ServeHTTP(w, r)
			return
		}
		rec := &bufferedResponse{header: http.Header{}}
		next.ServeHTTP(rec, r)
		body := rec.buf.Bytes()
		ct := rec.header.Get("Content-Type")
		if ct == "" {
			ct = http.DetectContentType(body)
		}
		if strings.HasPrefix(ct, "text/html") {
			if i := bytes.Index(body, []byte("<body>")); i >= 0 {
				i += len("<body>")
				body = append(body[:i:i], append([]byte(monitorBar), body[i:]...)...)
			}
			rec.header.Set("Content-Type", ct)
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(cmpCode(rec.code))
		_, _ = w.Write(body)
	})
}

func cmpCode(c int) int {
	if c == 0 {
		return http.StatusOK
	}
	return c
}

// bufferedResponse holds a response until it can be rewritten.
type bufferedResponse struct {
	header http.Header
	code   int
	buf    bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }
func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}
func (b *bufferedResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.buf.Write(p)
}
