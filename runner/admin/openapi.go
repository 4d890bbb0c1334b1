package admin

import (
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	valerrs "github.com/pb33f/libopenapi-validator/errors"

	"github.com/batonrun/baton/spec"
)

// openAPIDoc is the HTTP API's contract, served at /v1/openapi.json. The
// API refuses a request that breaks it (validateRequests), and the tests
// check every answer against it.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document of /v1/ (a copy).
func OpenAPI() []byte { return slices.Clone(openAPIDoc) }

// OpenAPIPath is where the admin server serves OpenAPI().
const OpenAPIPath = "/v1/openapi.json"

// NewOpenAPIValidator checks requests and responses against OpenAPI().
// The document is embedded, so an error here is a bug in it.
var NewOpenAPIValidator = sync.OnceValues(func() (validator.Validator, error) {
	doc, err := libopenapi.NewDocument(openAPIDoc)
	if err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	// Authentication is the guard's (admin.go); the document only says
	// which scheme it takes.
	v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation(), config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("openapi.json: %v", errs)
	}
	return v, nil
})

// serveOpenAPI answers GET /v1/openapi.json, without a token: the
// document holds no data, and tools read it before they are configured.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
}

// SchemaPath is where the admin server serves the run spec's JSON Schema
// (spec.Schema), for editors and tools in other languages.
const SchemaPath = "/v1/schemas/run.json"

// serveSchema answers GET /v1/schemas/run.json, without a token, as
// serveOpenAPI: the schema holds no data.
func serveSchema(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/schema+json")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(runSchema)
}

// runSchema is spec.Schema(), read once.
var runSchema = spec.Schema()

// validateRequests refuses, with 400 and a problem per wrong field, a
// request to a route of the document that breaks its rules. Requests the
// document does not describe (an unknown route or method) go on to the
// mux, which answers 404 or 405. A run spec is not checked here: the spec
// parser checks it against the same schema and also gives line numbers.
func (a *api) validateRequests(v validator.Validator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/runs" {
			next.ServeHTTP(w, r)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			// Read within the cap first: the validator would read it all.
			body, ok := a.readBody(w, r, a.maxBody)
			if !ok {
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		ok, errs := v.ValidateHttpRequestSync(r)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		var probs []Problem
		for _, e := range errs {
			if e.ValidationType == "path" || e.ValidationSubType == "missingOperation" {
				// Not a route the document has: the mux says so.
				next.ServeHTTP(w, r)
				return
			}
			probs = append(probs, requestProblems(e)...)
		}
		msgs := make([]string, len(probs))
		for i, p := range probs {
			msgs[i] = p.Field + ": " + p.Message
		}
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: strings.Join(msgs, "; "), Problems: probs})
	})
}

// requestProblems turns one validation error into problems naming the
// field: "query.limit", "header.Idempotency-Key", "path.id", or the
// body's field ("reason", "body" for the whole body).
func requestProblems(e *valerrs.ValidationError) []Problem {
	field := "request"
	switch {
	case e.ParameterName != "":
		field = e.ValidationSubType + "." + e.ParameterName
	case e.ValidationType == "request" || e.ValidationType == "requestBody":
		field = "body"
	}
	if len(e.SchemaValidationErrors) == 0 {
		return []Problem{{Field: field, Message: reason(e)}}
	}
	var out []Problem
	for _, s := range e.SchemaValidationErrors {
		f := field
		if p := strings.TrimPrefix(strings.TrimPrefix(s.FieldPath, "$"), "."); p != "" && field == "body" {
			f = p
		}
		out = append(out, Problem{Field: f, Message: friendlyPattern(s.Reason)})
	}
	return out
}

func reason(e *valerrs.ValidationError) string {
	if e.Reason != "" {
		return friendlyPattern(e.Reason)
	}
	return friendlyPattern(e.Message)
}

// patternWords says in words what each pattern of the document allows, so
// a refused id reads as fence/ids' own error does instead of quoting a
// regular expression.
var patternWords = map[string]string{
	`^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$`: "allowed: A-Z a-z 0-9 . _ -, and not only dots",
	`^[A-Za-z0-9._-]+$`:                             "allowed: A-Z a-z 0-9 . _ -",
	`^[A-Za-z0-9._:-]+\*?$`:                         "allowed: A-Z a-z 0-9 . _ : -, and a final * for a prefix rule",
	`^[A-Za-z0-9._:|-]*$`:                           "allowed: A-Z a-z 0-9 . _ : | -",
	`^[0-9]{1,20}(-[0-9]{1,20})?$`:                  "want an event id such as 1733300000000-0",
}

var patternRe = regexp.MustCompile(`does not match pattern '([^']*)'`)

// friendlyPattern rewrites "does not match pattern '^…$'" as the words of
// patternWords; a pattern it does not know stays as it is.
func friendlyPattern(msg string) string {
	return patternRe.ReplaceAllStringFunc(msg, func(m string) string {
		p := patternRe.FindStringSubmatch(m)[1]
		if w, ok := patternWords[p]; ok {
			return "is not allowed (" + w + ")"
		}
		return m
	})
}
