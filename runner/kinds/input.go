package kinds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/batonrun/baton/runner"
)

// decodeInput decodes a node's input strictly into v. Every failure is
// Permanent: the same input fails the same way on every attempt.
func decodeInput(kind string, in json.RawMessage, v any) error {
	if len(bytes.TrimSpace(in)) == 0 {
		return runner.Permanent(fmt.Errorf("%s: input: missing (want a JSON object)", kind))
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return runner.Permanent(fmt.Errorf("%s: input: %w", kind, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return runner.Permanent(fmt.Errorf("%s: input: trailing data after the JSON object", kind))
	}
	return nil
}

// permanentf is a Permanent input error naming the offending field.
func permanentf(kind, field, format string, args ...any) error {
	return runner.Permanent(fmt.Errorf("%s: input: %q: %s", kind, field, fmt.Sprintf(format, args...)))
}

// duration is an input duration: a Go duration string ("1m30s") or a
// number of seconds (1.5). Negative values are rejected.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var v time.Duration
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		p, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration such as \"30s\" or a number of seconds", s)
		}
		v = p
	} else {
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return fmt.Errorf("duration %s: want a Go duration such as \"30s\" or a number of seconds", b)
		}
		if math.IsNaN(f) || f*float64(time.Second) > math.MaxInt64 {
			return fmt.Errorf("duration %s: out of range", b)
		}
		v = time.Duration(f * float64(time.Second))
	}
	if v < 0 {
		return fmt.Errorf("duration %s: negative", v)
	}
	*d = duration(v)
	return nil
}

// result shapes command or response output into a node result: valid JSON
// is kept, other text becomes a JSON string, nothing becomes null.
func result(out []byte) json.RawMessage {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(out) {
		return json.RawMessage(bytes.Clone(out))
	}
	return textResult(string(out))
}

// textResult is s as a JSON string, whatever it holds (invalid UTF-8
// becomes U+FFFD).
func textResult(s string) json.RawMessage {
	b, _ := json.Marshal(s) // cannot fail: a string
	return b
}

// tailBuffer keeps the last max bytes written to it and counts the rest.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.dropped += int64(len(t.buf) + len(p) - t.max)
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 && len(t.buf) >= 2*t.max {
		// Compact only now and then, so a stream of small writes costs
		// amortised O(1) per byte.
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return n, nil
}

// Bytes returns the kept tail and how many bytes before it were dropped.
func (t *tailBuffer) Bytes() ([]byte, int64) {
	if over := len(t.buf) - t.max; over > 0 {
		return t.buf[over:], t.dropped + int64(over)
	}
	return t.buf, t.dropped
}
