package spec

import (
	"encoding/json"
	"strconv"
)

// Policy is what the runners that will run a spec let its jobs reach: the
// addresses an http node or a webhook may call, the variables and files an
// exec node's env may reference. A runner refuses the rest when a node
// runs; a submit that knows the runners' policy (the runner's own HTTP
// API) refuses at once what a spec says literally, naming the field, and
// stores nothing. runner/kinds.Checker is the stock kinds' Policy.
type Policy interface {
	// CheckURL returns why a webhook may not call raw, or nil.
	CheckURL(raw string) error
	// CheckInput returns the problems of a node's input for its kind,
	// each naming its field within the input ("url", "env.API_KEY").
	CheckInput(kind string, input json.RawMessage) []*Error
}

// checkPolicy files what lim's Policy refuses in s.
func (s *Run) checkPolicy(pol Policy, bad func(field, format string, a ...any)) {
	if pol == nil {
		return
	}
	if s.Notify != nil && s.Notify.URL != "" {
		if err := pol.CheckURL(s.Notify.URL); err != nil {
			bad("notify.url", "%s", err.Error())
		}
	}
	for i, n := range s.Nodes {
		if len(n.Input) == 0 {
			continue
		}
		for _, e := range pol.CheckInput(n.Kind, n.Input) {
			bad(fieldJoin(fieldOf(i)+".input", e.Field), "%s", e.Msg)
		}
	}
}

func fieldOf(i int) string { return "nodes[" + strconv.Itoa(i) + "]" }

func fieldJoin(a, b string) string {
	if b == "" {
		return a
	}
	return a + "." + b
}
