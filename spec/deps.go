package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// refKey is the key of an input reference object: {"$dep": "id"} or
// {"$dep": "id", "path": "items.0.url"}.
const refKey = "$dep"

// ResolveRefs returns input with every reference object replaced by what it
// names: {"$dep": "fetch"} by the direct dependency fetch's result, and
// {"$dep": "fetch", "path": "items.0.url"} by the value at that path in it
// (dot-separated object keys and array indices). An object holding "$dep"
// and any key other than "path" is an error, as is a reference to a node
// that is not a direct dependency or a path that does not resolve. Input
// without "$dep" is returned as it is, byte for byte.
func ResolveRefs(input json.RawMessage, deps map[string]json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(input, []byte(`"`+refKey+`"`)) {
		return input, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber() // numbers pass through exactly
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	v, err := resolveValue(v, deps)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	return out, nil
}

func resolveValue(v any, deps map[string]json.RawMessage) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x[refKey]; ok {
			return resolveRef(x, ref, deps)
		}
		for k, e := range x {
			r, err := resolveValue(e, deps)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []any:
		for i, e := range x {
			r, err := resolveValue(e, deps)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}

func resolveRef(obj map[string]any, ref any, deps map[string]json.RawMessage) (any, error) {
	show, _ := json.Marshal(obj)
	id, ok := ref.(string)
	if !ok {
		return nil, fmt.Errorf("input reference %s: %q must be a node id", show, refKey)
	}
	path, hasPath := obj["path"]
	if len(obj) > 2 || (len(obj) == 2 && !hasPath) {
		return nil, fmt.Errorf("input reference %s: only %q and \"path\" are allowed", show, refKey)
	}
	res, ok := deps[id]
	if !ok {
		return nil, fmt.Errorf("input reference %s: %s is not a direct dependency", show, id)
	}
	dec := json.NewDecoder(bytes.NewReader(res))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("input reference %s: result of %s: %w", show, id, err)
	}
	if !hasPath {
		return v, nil
	}
	p, ok := path.(string)
	if !ok {
		return nil, fmt.Errorf("input reference %s: \"path\" must be a string such as \"items.0.url\"", show)
	}
	if p == "" {
		return v, nil
	}
	for _, step := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[step]
			if !ok {
				return nil, fmt.Errorf("input reference %s: %s's result has no key %q", show, id, step)
			}
			v = e
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("input reference %s: %s's result has no index %q (length %d)", show, id, step, len(x))
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("input reference %s: %s's result has no %q: not an object or array there", show, id, step)
		}
	}
	return v, nil
}

// depRefs lists the node ids that input's reference objects name.
func depRefs(input json.RawMessage) []string {
	if !bytes.Contains(input, []byte(`"`+refKey+`"`)) {
		return nil
	}
	var v any
	if json.Unmarshal(input, &v) != nil {
		return nil // the kind reports an input that is not JSON
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if id, ok := x[refKey].(string); ok {
				out = append(out, id)
				return
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}
