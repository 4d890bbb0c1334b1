package kinds

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	"github.com/batonrun/baton/spec"
)

// Checker is the stock kinds' spec.Policy: at submit it refuses what the
// runner would refuse when the node runs, when the spec says it
// literally: an http node's URL or a webhook whose host is a refused
// address, an exec env reference to a variable or a file the runner does
// not let jobs read. A host name that resolves to a refused address is
// only known at the dial, and refused there.
type Checker struct{ Stock Stock }

var _ spec.Policy = Checker{}

// CheckURL refuses a webhook URL into a refused range.
func (c Checker) CheckURL(raw string) error { return c.Stock.HTTP.Egress.CheckURL(raw) }

// CheckInput checks an http node's url and an exec node's env references.
// An input it cannot read is left to the kind, which names what is wrong.
func (c Checker) CheckInput(kind string, input json.RawMessage) []*spec.Error {
	switch kind {
	case "http":
		var in struct {
			URL string `json:"url"`
		}
		if json.Unmarshal(input, &in) != nil || in.URL == "" {
			return nil
		}
		if err := c.Stock.HTTP.Egress.CheckURL(in.URL); err != nil {
			return []*spec.Error{{Field: "url", Msg: err.Error()}}
		}
	case "exec":
		var in struct {
			Env map[string]json.RawMessage `json:"env"`
		}
		if json.Unmarshal(input, &in) != nil {
			return nil
		}
		r := newRefs(c.Stock.Exec)
		var out []*spec.Error
		for _, k := range slices.Sorted(maps.Keys(in.Env)) {
			var v envValue
			if b := bytes.TrimSpace(in.Env[k]); len(b) == 0 || b[0] != '{' || v.UnmarshalJSON(b) != nil {
				continue
			}
			if msg := v.check(r); msg != "" {
				out = append(out, &spec.Error{Field: "env." + k, Msg: msg})
			}
		}
		return out
	}
	return nil
}
