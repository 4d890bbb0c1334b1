package admin_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	valerrs "github.com/pb33f/libopenapi-validator/errors"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/runner/admin"
)

// contract wraps an admin handler so that every /v1/ request a test makes
// and every answer it gets are checked against the OpenAPI document: an
// answer the document does not allow, or a request that breaks it and is
// not refused with 400, fails the test when it ends. So the document
// cannot drift from the code while the API tests pass.
func contract(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	v, err := admin.NewOpenAPIValidator()
	require.NoError(t, err)
	var mu sync.Mutex
	var broken []string
	t.Cleanup(func() { // runs after the server closes (registered first)
		mu.Lock()
		defer mu.Unlock()
		for _, b := range broken {
			t.Errorf("breaks openapi.json: %s", b)
		}
	})
	report := func(format string, args ...any) {
		mu.Lock()
		broken = append(broken, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			h.ServeHTTP(w, r)
			return
		}
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		rec := &recorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)

		req := r.Clone(r.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		what := r.Method + " " + r.URL.RequestURI()
		ok, errs := v.ValidateHttpRequestSync(req)
		if !ok && routed(errs) && !refused(rec.code) && !(r.Method == "POST" && r.URL.Path == "/v1/runs") {
			report("%s: request breaks the document yet was answered %d: %v", what, rec.code, errs)
		}
		if !routed(errs) { // a route or method the document does not have: 404 or 405
			if rec.code != http.StatusNotFound && rec.code != http.StatusMethodNotAllowed && !refused(rec.code) {
				report("%s: not in the document, answered %d", what, rec.code)
			}
			return
		}
		resp := &http.Response{StatusCode: rec.code, Header: rec.Header(), Request: req,
			Body: io.NopCloser(bytes.NewReader(rec.body.Bytes()))}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			resp.Body = io.NopCloser(strings.NewReader(`{}`)) // the document describes one event; the tests read them
		}
		if ok, errs := v.ValidateHttpResponse(req, resp); !ok {
			report("%s: answer %d %s breaks the document: %v", what, rec.code, truncate(rec.body.String()), errs)
		}
	})
}

type valerr = valerrs.ValidationError

// routed reports whether the request's route and method are in the
// document.
func routed(errs []*valerr) bool {
	for _, e := range errs {
		if e.ValidationType == "path" {
			return false
		}
	}
	return true
}

// refused: the answers a request breaking the document may get.
func refused(code int) bool {
	return code == http.StatusBadRequest || code == http.StatusUnauthorized || code == http.StatusForbidden ||
		code == http.StatusRequestEntityTooLarge
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// recorder passes an answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	code  int
	body  bytes.Buffer
	wrote bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	if r.body.Len() < 64<<20 {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and SetWriteDeadline
// (the event stream uses both).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// The document itself is valid OpenAPI 3.1.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	v, err := admin.NewOpenAPIValidator()
	require.NoError(t, err)
	ok, errs := v.ValidateDocument()
	for _, e := range errs {
		t.Error(e)
	}
	require.True(t, ok)
}
