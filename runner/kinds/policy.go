package kinds

import (
	"encoding/json"

	"github.com/batonrun/baton/jobpolicy"
	"github.com/batonrun/baton/spec"
)

// Checker is the stock kinds' spec.Policy, for a program that checks specs
// against one runner's options at submit (spec.Limits.Policy): it refuses
// what that runner would refuse when the node runs, when the spec says it
// literally. It is Stock's Rules (jobpolicy), the check every submit
// makes against the rules the live runners publish.
type Checker struct{ Stock Stock }

var _ spec.Policy = Checker{}

// CheckURL refuses a webhook URL into a refused range.
func (c Checker) CheckURL(raw string) error { return c.Stock.Rules(nil).CheckURL(raw) }

// CheckInput checks an http node's url and an exec node's env references.
func (c Checker) CheckInput(kind string, input json.RawMessage) []*spec.Error {
	return c.Stock.Rules(nil).CheckInput(kind, input)
}

// Rules are what a runner with these options and the stock kinds names
// (nil: all of them) lets its jobs reach, as it publishes them
// (runner.WorkerConfig.Jobs).
func (s Stock) Rules(names []string) *jobpolicy.Rules {
	if names == nil {
		names = StockNames
	}
	return &jobpolicy.Rules{Kinds: names, Egress: s.HTTP.Egress, EnvRefs: s.Exec.EnvRefs, FileDirs: s.Exec.FileDirs}
}
