package spec

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/batonrun/baton/fence/ids"
)

// LimitUse is one entry of a node's "limits": a limit name, which may hold
// templates filled in at submit ({thread}, {run}, {input.PATH}), and the
// cost the node's claim takes from the limit's rate (tokens, requests).
//
//	"limits": ["openai", "tenant:{thread}", {"name": "openai-tpm", "cost": 2000}]
//
// A name must be a limit set with enqueue limit set (or covered by a prefix
// rule such as tenant:*); the submit refuses one that is not. A submitter
// can name limits, never set them.
type LimitUse struct {
	Name string `json:"name"`
	// Cost is taken from the limit's rate by each claim; zero: 1. A
	// handler reports more as it learns it (Task.Spend, "::spend N").
	Cost int64 `json:"cost,omitempty"`
}

// MarshalJSON writes a use at cost 1 as its bare name.
func (u LimitUse) MarshalJSON() ([]byte, error) {
	if u.Cost == 0 {
		return json.Marshal(u.Name)
	}
	type plain LimitUse
	return json.Marshal(plain(u))
}

// UnmarshalJSON reads a name or {"name", "cost"}.
func (u *LimitUse) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &u.Name)
	}
	type plain LimitUse
	return json.Unmarshal(b, (*plain)(u))
}

// MaxLimitCost bounds a node's cost for a rate.
const MaxLimitCost = 1 << 40

// checkLimits validates a node's limit entries as written: names with
// well-formed templates, and costs.
func checkLimits(f string, n Node, bad func(field, format string, a ...any)) {
	seen := map[string]int{}
	for j, u := range n.Limits {
		field := fmt.Sprintf("%s.limits[%d]", f, j)
		if u.Cost < 0 || u.Cost > MaxLimitCost {
			bad(field+".cost", "%d: want 1 to 2^40", u.Cost)
		}
		if u.Name == "" {
			bad(field, "empty limit name")
			continue
		}
		if k, dup := seen[u.Name]; dup {
			bad(field, "duplicate limit %s (also limits[%d])", quote(u.Name), k)
		}
		seen[u.Name] = j
		if msg := limitNameProblem(u.Name); msg != "" {
			bad(field, "%s", msg)
		}
	}
}

// limitNameProblem is what is wrong with a limit name as written, "" if
// nothing is: its literal parts must be a limit name once its templates
// are filled in with an id, so it is checked with each template as "x".
func limitNameProblem(name string) string {
	lit, msg := expandLimit(name, func(string) (string, string) { return "x", "" })
	if msg != "" {
		return msg
	}
	if err := ids.ValidateLimitKey("", lit); err != nil {
		return idMessage(err)
	}
	return ""
}

// expandLimit fills in a limit name's templates with what fill returns; a
// message when a template is malformed or fill refuses it.
func expandLimit(name string, fill func(tmpl string) (string, string)) (string, string) {
	var b strings.Builder
	rest := name
	for {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), ""
		}
		if rest[i] == '}' {
			return "", fmt.Sprintf("%s: unmatched }", quote(name))
		}
		b.WriteString(rest[:i])
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", fmt.Sprintf("%s: unclosed {", quote(name))
		}
		tmpl := rest[i+1 : i+j]
		switch {
		case tmpl == "thread", tmpl == "run", strings.HasPrefix(tmpl, "input.") && len(tmpl) > len("input."):
		default:
			return "", fmt.Sprintf("%s: unknown template {%s} (want {thread}, {run} or {input.PATH})", quote(name), tmpl)
		}
		v, msg := fill(tmpl)
		if msg != "" {
			return "", msg
		}
		b.WriteString(v)
		rest = rest[i+j+1:]
	}
}

// compileLimits expands a validated node's limits for run id run of thread
// thread (the run's own id when it has none): the stored form
// "key=cost,key=~cost", "" for none; "~" marks a cost the spec named.
func compileLimits(f string, n Node, run, thread string) (string, error) {
	if len(n.Limits) == 0 {
		return "", nil
	}
	var input any
	if len(n.Input) > 0 {
		_ = json.Unmarshal(n.Input, &input) // validated JSON
	}
	parts := make([]string, 0, len(n.Limits))
	seen := map[string]bool{}
	for j, u := range n.Limits {
		field := fmt.Sprintf("%s.limits[%d]", f, j)
		key, msg := expandLimit(u.Name, func(tmpl string) (string, string) {
			switch tmpl {
			case "thread":
				return thread, ""
			case "run":
				if run == "" {
					return "", "{run}: the run has no id yet (set \"id\", or submit through a client, which gives it one)"
				}
				return run, ""
			}
			return inputPath(input, strings.TrimPrefix(tmpl, "input."))
		})
		if msg != "" {
			return "", &Error{Field: field, Msg: msg}
		}
		if err := ids.ValidateLimitKey(field, key); err != nil {
			return "", &Error{Field: field, Msg: idMessage(err)}
		}
		if seen[key] {
			return "", &Error{Field: field, Msg: fmt.Sprintf("%s names limit %s twice", quote(u.Name), quote(key))}
		}
		seen[key] = true
		// A cost named in the spec is metered ("=~N"): a cost the attempt
		// reports (Task.Spend, "::spend N") replaces it when it ends.
		if u.Cost == 0 {
			parts = append(parts, key+"=1")
		} else {
			parts = append(parts, key+"=~"+strconv.FormatInt(u.Cost, 10))
		}
	}
	return strings.Join(parts, ","), nil
}

// inputPath reads a dotted path of object keys from a node's input: a
// string, or a whole number, as a limit name part.
func inputPath(input any, path string) (string, string) {
	v := input
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Sprintf("{input.%s}: the input has no %s (not an object there)", path, quote(k))
		}
		if v, ok = m[k]; !ok {
			return "", fmt.Sprintf("{input.%s}: the input has no %s", path, quote(k))
		}
	}
	switch x := v.(type) {
	case string:
		return x, ""
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10), ""
		}
	}
	return "", fmt.Sprintf("{input.%s}: want a string or a whole number", path)
}

// LimitKeys lists the limit keys the compiled node takes part in, in
// order, with the field that named each ("nodes[2].limits[0]").
func (n CompiledNode) LimitKeys(index int) (keys, fields []string) {
	if n.Limits == "" {
		return nil, nil
	}
	for j, p := range strings.Split(n.Limits, ",") {
		k, _, _ := strings.Cut(p, "=")
		keys = append(keys, k)
		fields = append(fields, fmt.Sprintf("nodes[%d].limits[%d]", index, j))
	}
	return keys, fields
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
