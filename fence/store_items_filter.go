package fence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A search's filter, compared as LangGraph's stores compare (the Python
// and JS stores compare the same way).

// validateFilter refuses an operator LangGraph's stores do not know.
func validateFilter(f any) error {
	switch x := f.(type) {
	case map[string]any:
		for k, v := range x {
			if strings.HasPrefix(k, "$") && !slices.Contains([]string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"}, k) {
				return fmt.Errorf("%w: filter operator %s is not supported ($eq, $ne, $gt, $gte, $lt, $lte)", ErrInvalidItem, k)
			}
			if err := validateFilter(v); err != nil {
				return err
			}
		}
	case []any:
		for _, v := range x {
			if err := validateFilter(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// matchFilter says whether an item's value matches a search filter.
func matchFilter(value json.RawMessage, filter map[string]any) bool {
	if len(filter) == 0 {
		return true
	}
	var v map[string]any
	if json.Unmarshal(value, &v) != nil {
		return false
	}
	for k, want := range filter {
		if !compareValues(v[k], want) {
			return false
		}
	}
	return true
}

// compareValues compares as LangGraph's InMemoryStore does: an object of
// "$" operators applies them, another object matches field by field, a
// list element by element, anything else by equality.
func compareValues(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		ops := false
		for k := range w {
			if strings.HasPrefix(k, "$") {
				ops = true
			}
		}
		if ops {
			for op, arg := range w {
				if !applyOperator(got, op, arg) {
					return false
				}
			}
			return true
		}
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !compareValues(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !compareValues(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return equalJSON(got, want)
	}
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func applyOperator(got any, op string, arg any) bool {
	switch op {
	case "$eq":
		return equalJSON(got, arg)
	case "$ne":
		return !equalJSON(got, arg)
	}
	g, ok1 := got.(float64)
	a, ok2 := arg.(float64)
	if !ok1 || !ok2 {
		return false
	}
	switch op {
	case "$gt":
		return g > a
	case "$gte":
		return g >= a
	case "$lt":
		return g < a
	case "$lte":
		return g <= a
	}
	return false
}
