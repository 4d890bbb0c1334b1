package spec

import (
	"bytes"
	"encoding/json"
	"slices"
)

// stockInputs are the fields the stock kinds read from a node's input
// (runner/kinds), the required ones first. An input that names another
// field, or misses a required one, fails on every attempt; Validate
// refuses it at submit instead, naming the field.
var stockInputs = map[string]struct {
	required []string
	known    []string
}{
	"exec":  {[]string{"command"}, []string{"command", "env", "dir", "timeout"}},
	"http":  {[]string{"url"}, []string{"url", "body", "headers", "timeout", "bare", "follow_redirects"}},
	"sleep": {[]string{"duration"}, []string{"duration"}},
}

// StockInputFields returns the fields a stock kind's input may hold, so
// that the kinds (runner/kinds) can test that they read exactly these.
func StockInputFields(kind string) []string { return slices.Clone(stockInputs[kind].known) }

// checkStockInput files the problems of the input of a node of a stock
// kind (f is the node's field path): a field the kind does not read, a
// field it needs. An input that is a dependency's result ({"$dep": ...})
// is known only when the node runs, and one that is absent or not a JSON
// object is the kind's to word: both are left alone.
func checkStockInput(f string, n Node, bad func(field, format string, a ...any)) {
	kind, ok := stockInputs[n.Kind]
	if !ok {
		return
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(bytes.TrimSpace(n.Input), &fields) != nil || fields == nil {
		return // none, or not an object: the kind says what it wants
	}
	if _, ref := fields[refKey]; ref {
		return
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(kind.known, k) {
			bad(f+".input."+k, "unknown field of the %s kind's input; %s", n.Kind, suggest(k, kind.known))
		}
	}
	for _, k := range kind.required {
		if _, ok := fields[k]; !ok {
			bad(f+".input."+k, "missing: the %s kind needs it", n.Kind)
		}
	}
}
