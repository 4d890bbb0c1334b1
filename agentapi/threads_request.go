package agentapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// Helpers of the assistants and threads routes: ids, bodies, times and the
// metadata filter the reference server applies.

// maxBody caps a request body of these routes.
const maxBody = 8 << 20

// timeText is a time as the reference server writes it (JavaScript's
// Date.toJSON).
func timeText(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// bodyInto decodes the request's JSON body into v. An empty body is {}.
// A body that is not JSON, or a field of the wrong type, is answered 422
// naming the field, and bodyInto returns false.
func bodyInto(w http.ResponseWriter, r *http.Request, v any) bool {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return false
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		writeError(w, http.StatusUnprocessableEntity, describeJSONError(err))
		return false
	}
	return true
}

// describeJSONError words a decoding error with the field it met.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return fmt.Sprintf("body: expected %s, got %s", goTypeName(te.Type.String()), te.Value)
		}
		return fmt.Sprintf("%s: expected %s, got %s", field, goTypeName(te.Type.String()), te.Value)
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.Error()
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("body is not valid JSON: %v", se)
	}
	return "body: " + err.Error()
}

func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "agentapi."), strings.HasPrefix(t, "struct"):
		return "an object"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	}
	return t
}

// fieldError is a field that decoded but holds a value the schema refuses.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// invalid answers 422 naming the field.
func invalid(w http.ResponseWriter, field, msg string) {
	writeError(w, http.StatusUnprocessableEntity, field+": "+msg)
}

// object is a JSON object field: null and absent are nil; anything but an
// object fails to decode (422).
type object map[string]json.RawMessage

// marshal returns the object's JSON, {} for nil.
func (o object) marshal() []byte {
	if o == nil {
		return []byte("{}")
	}
	b, _ := json.Marshal(map[string]json.RawMessage(o))
	return b
}

func parseObject(b []byte) object {
	var o object
	_ = json.Unmarshal(b, &o)
	if o == nil {
		o = object{}
	}
	return o
}

// contains reports whether doc holds sub as the reference's metadata
// filters mean it (JSONB containment): every key of an object with a
// value containing sub's, every element of an array in some element,
// scalars equal.
func contains(doc, sub json.RawMessage) bool {
	var d, s any
	if json.Unmarshal(doc, &d) != nil || json.Unmarshal(sub, &s) != nil {
		return false
	}
	return containsValue(d, s)
}

func containsValue(d, s any) bool {
	switch sv := s.(type) {
	case map[string]any:
		dv, ok := d.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range sv {
			x, ok := dv[k]
			if !ok || !containsValue(x, v) {
				return false
			}
		}
		return true
	case []any:
		dv, ok := d.([]any)
		if !ok {
			return false
		}
		for _, v := range sv {
			if !slices.ContainsFunc(dv, func(x any) bool { return containsValue(x, v) }) {
				return false
			}
		}
		return true
	default:
		return d == s
	}
}

// selectFields keeps the fields of doc that sel names (all when sel is
// empty).
func selectFields(doc map[string]any, sel []string) map[string]any {
	if len(sel) == 0 {
		return doc
	}
	out := make(map[string]any, len(sel))
	for _, f := range sel {
		if v, ok := doc[f]; ok {
			out[f] = v
		}
	}
	return out
}

// page checks limit and offset (the reference's bounds) and fills defaults.
func page(w http.ResponseWriter, limit, offset *int) (int, int, bool) {
	l, o := 10, 0
	if limit != nil {
		if *limit < 1 || *limit > 1000 {
			invalid(w, "limit", "must be between 1 and 1000")
			return 0, 0, false
		}
		l = *limit
	}
	if offset != nil {
		if *offset < 0 {
			invalid(w, "offset", "must be at least 0")
			return 0, 0, false
		}
		o = *offset
	}
	return l, o, true
}

// paginate writes the reference's pagination headers for a page of n
// items at offset, of total matches.
func paginate(w http.ResponseWriter, offset, limit, n int) {
	next := offset + n
	if n == limit {
		w.Header().Set("X-Pagination-Next", fmt.Sprint(next))
		w.Header().Set("X-Pagination-Total", fmt.Sprint(next+1))
		return
	}
	w.Header().Set("X-Pagination-Total", fmt.Sprint(next))
}

// newOp names one write for the store's scripts: a retry of the write
// after a lost reply carries it, and the script answers as it did.
func newOp() string { return fence.NewClaimID() }
