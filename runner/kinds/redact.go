package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/batonrun/baton/runner"
)

// Redacted is what a secret value is shown as.
const Redacted = "[redacted]"

// RedactMinLen is the shortest value redacted: a shorter one ("1", "yes")
// would blank out unrelated text and is no secret worth the name.
const RedactMinLen = 6

// Redactor removes known secret values from what a kind returns: a
// result, an error's message. It redacts by value, not by a guess at a
// field's name, so a command that prints its API key, an error that
// quotes a database URL, or a response that echoes a header shows
// [redacted] wherever the value went: the node's status, its events, the
// run view, the logs and traces that carry the error, the result. A nil
// *Redactor redacts nothing.
type Redactor struct{ values []string }

// NewRedactor returns a Redactor of values; those shorter than
// RedactMinLen are left out.
func NewRedactor(values ...string) *Redactor { return (*Redactor)(nil).With(values...) }

// With returns a Redactor of r's values and values.
func (r *Redactor) With(values ...string) *Redactor {
	var out []string
	if r != nil {
		out = slices.Clone(r.values)
	}
	for _, v := range values {
		if len(v) < RedactMinLen || slices.Contains(out, v) {
			continue
		}
		out = append(out, v)
		// A value also shows JSON-escaped inside a JSON string.
		if b, _ := json.Marshal(v); len(b) > 2 && string(b[1:len(b)-1]) != v {
			out = append(out, string(b[1:len(b)-1]))
		}
	}
	if len(out) == 0 {
		return nil
	}
	// Longest first, so a value holding another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{values: out}
}

// String returns s with every value replaced by Redacted.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return s
}

// JSON returns raw with every value replaced in its strings, its keys and
// its numbers (a number that is a secret becomes the string Redacted).
// raw that is not JSON is redacted as text, into a JSON string.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r == nil || raw == nil || !r.any(string(raw)) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return textResult(r.String(string(raw)))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(r.walk(v)) != nil {
		return textResult(r.String(string(raw)))
	}
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// any reports whether s holds a value in any form.
func (r *Redactor) any(s string) bool {
	for _, v := range r.values {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

func (r *Redactor) walk(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case json.Number:
		if red := r.String(x.String()); red != x.String() {
			return red
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.walk(e)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = r.walk(e)
		}
	}
	return v
}

// Error returns err with its message redacted; errors.Is and errors.As
// still see what it wraps (a Permanent error stays permanent, a Park
// stays a park).
func (r *Redactor) Error(err error) error {
	if r == nil || err == nil {
		return err
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Redacting returns k with r applied to every result and error it returns.
// RegisterStockWith wraps every stock kind in it; a program wraps its own.
func Redacting(k runner.Kind, r *Redactor) runner.Kind {
	if r == nil {
		return k
	}
	return redactingKind{k, r}
}

type redactingKind struct {
	k runner.Kind
	r *Redactor
}

func (k redactingKind) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	out, err := k.k.Run(ctx, t)
	return k.r.JSON(out), k.r.Error(err)
}

var _ error = (*redactedError)(nil)
