package jobpolicy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/batonrun/baton/spec"
)

// Runner is one live runner as a submit sees it: what it serves and the
// rules it published (nil: it published none, as a Go program that
// registers its own kinds may not; its jobs are checked when they run).
type Runner struct {
	ID     string
	Kinds  []string
	Queues []string
	Rules  *Rules
}

// Check returns what the live runners would refuse in run, every problem
// at once, each a *spec.Error naming its field (errors.Is spec.ErrInvalid),
// joined; nil when nothing is refused. A node is checked against every
// live runner that serves its kind on its queue: any of them may claim
// it, and one that refuses it fails it for good. A webhook is checked
// against every live runner: any of them may send it. A stock kind that
// every live runner of the node's queue has switched off (KINDS) is
// refused, since none will ever run it there. With no live runner that
// published rules, nothing is known and nothing is refused: a run
// submitted before its runners start is checked when it runs.
func Check(live []Runner, run *spec.Run) error {
	if run == nil {
		return nil
	}
	var errs []error
	seen := map[string]bool{}
	add := func(field, msg string) {
		if key := field + "\x00" + msg; !seen[key] {
			seen[key] = true
			errs = append(errs, &spec.Error{Field: field, Msg: msg})
		}
	}
	for i, n := range run.Nodes {
		queue := n.Queue
		if queue == "" {
			queue = spec.DefaultQueue
		}
		f := fmt.Sprintf("nodes[%d]", i)
		var serving, onQueue []Runner
		for _, r := range live {
			if !slices.Contains(r.Queues, queue) {
				continue
			}
			onQueue = append(onQueue, r)
			if slices.Contains(r.Kinds, n.Kind) {
				serving = append(serving, r)
			}
		}
		if len(serving) == 0 {
			if switchedOff(onQueue, n.Kind) {
				add(f+".kind", fmt.Sprintf("%s is switched off on every live runner of queue %s (KINDS)", n.Kind, queue))
			}
			continue
		}
		if len(n.Input) == 0 {
			continue
		}
		for _, r := range serving {
			if r.Rules == nil {
				continue
			}
			for _, e := range r.Rules.CheckInput(n.Kind, n.Input) {
				add(f+".input."+e.Field, e.Msg)
			}
		}
	}
	if run.Notify != nil && run.Notify.URL != "" {
		for _, r := range live {
			if r.Rules == nil {
				continue
			}
			if err := r.Rules.CheckURL(run.Notify.URL); err != nil {
				add("notify.url", err.Error())
			}
		}
	}
	return errors.Join(errs...)
}

// switchedOff reports whether kind is a stock kind that every one of
// runners (at least one) published as off.
func switchedOff(runners []Runner, kind string) bool {
	if len(runners) == 0 || !slices.Contains(StockKinds, kind) {
		return false
	}
	for _, r := range runners {
		if r.Rules == nil || slices.Contains(r.Rules.Kinds, kind) {
			return false
		}
	}
	return true
}
