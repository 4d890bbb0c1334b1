package agentapitest_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// A difference between two transcripts: where (a path such as
// `stream[3][1].langgraph_node`, its first part the script's step) and what.
type difference struct{ path, what string }

// compare lists where ours differs from ref, step by step.
func compare(ref, ours map[string]any) []difference {
	var out []difference
	diff(ref, ours, "", &out)
	return out
}

func diff(a, b any, path string, out *[]difference) {
	add := func(format string, args ...any) {
		*out = append(*out, difference{strings.TrimPrefix(path, "."), fmt.Sprintf(format, args...)})
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			add("reference has an object, baton %s", short(b))
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inA:
				*out = append(*out, difference{strings.TrimPrefix(path+"."+k, "."), "only baton has it: " + short(y)})
			case !inB:
				*out = append(*out, difference{strings.TrimPrefix(path+"."+k, "."), "only the reference has it: " + short(x)})
			default:
				diff(x, y, path+"."+k, out)
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			add("reference has a list, baton %s", short(b))
			return
		}
		if len(av) != len(bv) {
			add("reference has %d items, baton %d: reference %s, baton %s", len(av), len(bv), short(names(av)), short(names(bv)))
			return
		}
		for i := range av {
			diff(av[i], bv[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			add("reference %s, baton %s", ja, jb)
		}
	}
}

// names shortens a list of stream events to their names, the rest as is.
func names(l []any) any {
	ev := make([]any, 0, len(l))
	for _, x := range l {
		if p, ok := x.([]any); ok && len(p) == 2 {
			if s, ok := p[0].(string); ok {
				ev = append(ev, s)
				continue
			}
		}
		return l
	}
	return ev
}

func short(x any) string {
	b, _ := json.Marshal(x)
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
