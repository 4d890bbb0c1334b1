package check

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// checkThreads judges the conversation workload against the thread
// contract: one active run per thread at a time; every queued run started
// or withdrawn, and a withdrawn one never started; interrupt and rollback
// cancel the run they were queued behind; checkpoint versions strictly
// increasing per thread and namespace, never reused; a checkpoint accepted
// only from the current claim of a node of the thread's active run; every
// attempt started from the thread's newest checkpoint, the rolled-back
// runs' removed (so after an interrupt, from the interrupted run's last
// checkpoint, and after a rollback, from the newest before the rolled-back
// run); and at the end, the namespaces hold what that says.
func checkThreads(in Input, r *Report) []Violation {
	ti := in.Threads
	if ti == nil {
		return nil
	}
	fig := &ThreadFigures{Runs: map[string]int{}, Busy: map[string]int{}, Cancels: len(ti.Cancels)}
	r.Threads = fig
	byThread, byID := runsOfThreads(ti, in.Runs)
	fig.Threads = len(byThread)
	var out []Violation
	for _, s := range ti.Submits {
		strategy := cmp.Or(s.Strategy, "none")
		switch s.Outcome {
		case SubmitAccepted:
			fig.Runs[strategy]++
		case SubmitBusy:
			fig.Busy[strategy]++
			if f, ok := in.Runs[s.Run]; ok && f.Info != nil {
				out = append(out, Violation{Check: "submit", Run: s.Run,
					Msg: fmt.Sprintf("answered thread busy (%s), but the run is stored (%s)", s.Err, f.Info.Status)})
			}
		}
	}
	for _, f := range in.Runs {
		for _, e := range f.Events {
			if e.Type == "rolled_back" {
				fig.RolledBackEvents++
			}
		}
	}
	cks := checkpointsOf(in.Runs, byID)
	for _, cs := range cks {
		fig.Checkpoints += len(cs)
	}
	seen := sampled(ti.Checkpoints)
	for _, vs := range seen {
		fig.Sampled += len(vs)
	}
	out = append(out, checkVersions(cks, ti.Checkpoints)...)
	out = append(out, checkCkptFence(in, cks, seen, byThread)...)
	for _, t := range slices.Sorted(maps.Keys(byThread)) {
		rs := byThread[t]
		out = append(out, checkActive(t, rs)...)
		out = append(out, checkQueue(rs, fig)...)
		out = append(out, checkInterrupts(rs, byID)...)
	}
	removed, undecided := rollbacks(byThread, byID)
	fig.Rollbacks = len(removed)
	out = append(out, checkResumes(cks, seen, removed, undecided, byID, fig)...)
	out = append(out, checkFinal(ti, cks, seen, removed, undecided)...)
	return out
}

// checkActive: at most one run of the thread active at any time.
func checkActive(thread string, rs []*trun) []Violation {
	var out []Violation
	for i, a := range rs {
		if a.start == 0 {
			continue
		}
		for _, b := range rs[i+1:] {
			if b.start == 0 {
				continue
			}
			x, y := a, b
			if y.start < x.start {
				x, y = y, x
			}
			if x.end == 0 || y.start < x.end {
				out = append(out, Violation{Check: "thread_active", Run: y.id,
					Msg: fmt.Sprintf("thread %s: started at %s while %s was active (started %s, ended %s)", thread,
						stampMS(y.start), x.id, stampMS(x.start), endStamp(x.end))})
			}
		}
	}
	return out
}

func endStamp(ms int64) string {
	if ms == 0 {
		return "never"
	}
	return stampMS(ms)
}

// checkQueue: every queued run started or was cancelled; one cancelled
// while queued never started.
func checkQueue(rs []*trun, fig *ThreadFigures) []Violation {
	var out []Violation
	for _, r := range rs {
		if !r.queued {
			continue
		}
		fig.Queued++
		withdrawn := r.cancel != 0 && (r.start == 0 || r.cancel < r.start)
		if withdrawn {
			fig.Withdrawn++
		}
		switch {
		case r.start == 0 && r.cancel == 0:
			out = append(out, Violation{Check: "thread_queue", Run: r.id,
				Msg: fmt.Sprintf("queued behind %s, never started nor cancelled (now %s)", r.behind, r.status)})
		case r.start != 0 && withdrawn:
			out = append(out, Violation{Check: "thread_queue", Run: r.id,
				Msg: fmt.Sprintf("cancelled while queued at %s, started at %s", stampMS(r.cancel), stampMS(r.start))})
		}
	}
	return out
}

// checkInterrupts: an interrupt or rollback run queued behind a RUNNING
// run cancelled it (in the submit's atomic step, by the contract).
func checkInterrupts(rs []*trun, byID map[string]*trun) []Violation {
	var out []Violation
	for _, r := range rs {
		if !r.queued || (r.strategy != "interrupt" && r.strategy != "rollback") {
			continue
		}
		a := byID[r.behind]
		if a == nil || a.cancel != 0 {
			continue
		}
		if running, sure := targets(r, a); !running || !sure {
			continue
		}
		out = append(out, Violation{Check: "interrupt", Run: r.id,
			Msg: fmt.Sprintf("%s run queued at %s behind %s, RUNNING then, which was never cancelled (ended %s %s)",
				r.strategy, stampMS(r.submitted), a.id, a.status, endStamp(a.end))})
	}
	return out
}

// runningAt: the run was active at t for sure (not within the same ms of
// its start or end).
func runningAt(a *trun, t int64) bool {
	return a.start != 0 && a.start < t && (a.end == 0 || t < a.end)
}

// rollbacks applies the contract's rollback rule. A rollback run queued
// behind a run A that was RUNNING at its submit targets A; A's checkpoints
// are removed at the first start of a run of the thread after A ended,
// unless every rollback targeting A was withdrawn (cancelled) before it.
// removed maps A to that start. undecided maps a thread to the first time
// from which the rule cannot be applied (an order within one ms).
func rollbacks(byThread map[string][]*trun, byID map[string]*trun) (removed map[string]int64, undecided map[string]int64) {
	removed, undecided = map[string]int64{}, map[string]int64{}
	unsure := func(t string, at int64) {
		if u, ok := undecided[t]; !ok || at < u {
			undecided[t] = at
		}
	}
	for t, rs := range byThread {
		targeted := map[string][]*trun{} // A -> rollback runs targeting it
		for _, rb := range rs {
			a := byID[rb.behind]
			if rb.strategy != "rollback" || !rb.queued || a == nil || a.start == 0 {
				continue
			}
			switch running, sure := targets(rb, a); {
			case !sure:
				unsure(t, rb.submitted)
			case running:
				targeted[a.id] = append(targeted[a.id], rb)
			}
		}
		for aid, rbs := range targeted {
			a := byID[aid]
			if a.end == 0 {
				continue
			}
			var next int64 // the first start after A ended
			for _, x := range rs {
				if x.start != 0 && x.start >= a.end && (next == 0 || x.start < next) {
					next = x.start
				}
			}
			if next == 0 {
				continue
			}
			live := false
			for _, rb := range rbs {
				switch {
				case rb.cancel == 0 || rb.cancel > next:
					live = true
				case rb.cancel == next:
					unsure(t, next)
				}
			}
			if live {
				removed[aid] = next
			}
		}
	}
	return removed, undecided
}

// sampled indexes the checkpoints read back by thread, namespace and
// version (the first read of each).
func sampled(seen []SeenCheckpoint) map[ThreadNS]map[int64]SeenCheckpoint {
	out := map[ThreadNS]map[int64]SeenCheckpoint{}
	for _, c := range seen {
		k := ThreadNS{c.Thread, c.NS}
		if out[k] == nil {
			out[k] = map[int64]SeenCheckpoint{}
		}
		if _, ok := out[k][c.Version]; !ok {
			out[k][c.Version] = c
		}
	}
	return out
}

// checkVersions: per thread and namespace, each version accepted once,
// and a checkpoint accepted later never has a lower version; a version
// read back twice names one checkpoint.
func checkVersions(cks map[ThreadNS][]*ckEvent, seen []SeenCheckpoint) []Violation {
	var out []Violation
	for _, k := range sortedKeys(cks) {
		cs := cks[k]
		for i := 1; i < len(cs); i++ {
			if cs[i].version == cs[i-1].version {
				out = append(out, Violation{Check: "ckpt_version", Run: cs[i].run.id,
					Msg: fmt.Sprintf("thread %s ns %s: version %d accepted twice: %s and %s", k.Thread, k.NS,
						cs[i].version, cs[i-1], cs[i])})
			}
		}
		byAt := slices.Clone(cs)
		slices.SortStableFunc(byAt, func(a, b *ckEvent) int { return cmp.Compare(a.at, b.at) })
		var maxBefore *ckEvent // the highest version accepted in an earlier ms
		var groupMax *ckEvent
		for i, c := range byAt {
			if i > 0 && c.at != byAt[i-1].at {
				if maxBefore == nil || groupMax.version > maxBefore.version {
					maxBefore = groupMax
				}
				groupMax = nil
			}
			if groupMax == nil || c.version > groupMax.version {
				groupMax = c
			}
			if maxBefore != nil && c.version <= maxBefore.version {
				out = append(out, Violation{Check: "ckpt_version", Run: c.run.id,
					Msg: fmt.Sprintf("thread %s ns %s: %s accepted after %s", k.Thread, k.NS, c, maxBefore)})
			}
		}
	}
	ids := map[ThreadNS]map[int64]string{}
	for _, c := range seen {
		k := ThreadNS{c.Thread, c.NS}
		if ids[k] == nil {
			ids[k] = map[int64]string{}
		}
		if id, ok := ids[k][c.Version]; ok && id != c.ID {
			out = append(out, Violation{Check: "ckpt_version", Run: c.Run,
				Msg: fmt.Sprintf("thread %s ns %s: version %d read back as checkpoint %s, earlier as %s", k.Thread,
					k.NS, c.Version, c.ID, id)})
		}
		ids[k][c.Version] = c.ID
	}
	return out
}

func sortedKeys[V any](m map[ThreadNS]V) []ThreadNS {
	return slices.SortedFunc(maps.Keys(m), func(a, b ThreadNS) int {
		return cmp.Or(cmp.Compare(a.Thread, b.Thread), cmp.Compare(a.NS, b.NS))
	})
}

// checkCkptFence: each accepted checkpoint was saved while its run was the
// thread's active run and its node's epoch was current (claimed, not yet
// ended or taken over), by the claim id the histories say that epoch was
// granted to.
func checkCkptFence(in Input, cks map[ThreadNS][]*ckEvent, seen map[ThreadNS]map[int64]SeenCheckpoint,
	byThread map[string][]*trun) []Violation {
	granted := map[string]map[string]bool{} // run/node@epoch -> claim ids granted
	grant := func(run, node string, epoch int64, claim string) {
		k := fmt.Sprintf("%s/%s@%d", run, node, epoch)
		if granted[k] == nil {
			granted[k] = map[string]bool{}
		}
		granted[k][claim] = true
	}
	for _, o := range in.Ops {
		switch {
		case o.Op == "claim" && o.Outcome == OK:
			grant(o.Run, o.Node, o.Epoch, o.Claim)
		case o.Op == "commit" && o.Outcome == OK && o.Next != nil:
			grant(o.NextRun(), o.Next.Node, o.Next.Epoch, o.Next.Claim)
		}
	}
	var out []Violation
	for _, k := range sortedKeys(cks) {
		for _, c := range cks[k] {
			w := c.run
			bad := func(format string, a ...any) {
				out = append(out, Violation{Check: "ckpt_fence", Run: w.id, Node: c.node,
					Msg: fmt.Sprintf("thread %s ns %s: %s ", k.Thread, k.NS, c) + fmt.Sprintf(format, a...)})
			}
			switch {
			case w.start == 0 || c.at < w.start:
				bad("saved before its run started (%s)", endStamp(w.start))
				continue
			case w.end != 0 && c.at > w.end:
				bad("saved after its run ended (%s %s)", w.status, stampMS(w.end))
				continue
			}
			for _, x := range byThread[k.Thread] {
				if x != w && x.start > w.start && x.start < c.at {
					bad("saved by %s after %s became the thread's active run (%s)", w.id, x.id, stampMS(x.start))
					break
				}
			}
			claimed, ok := w.claims[c.node][c.epoch]
			switch {
			case !ok:
				bad("saved at an epoch never claimed")
				continue
			case c.at < claimed:
				bad("saved before epoch %d was claimed (%s)", c.epoch, stampMS(claimed))
				continue
			}
			if end, ok := w.ends[c.node][c.epoch]; ok && c.at > end {
				bad("saved after epoch %d ended (%s)", c.epoch, stampMS(end))
				continue
			}
			for e, at := range w.claims[c.node] {
				if e > c.epoch && at < c.at {
					bad("saved after epoch %d was claimed (%s)", e, stampMS(at))
					break
				}
			}
			sc, ok := seen[k][c.version]
			if !ok {
				continue
			}
			st, ok := ParseStep(sc.Data)
			if !ok {
				continue
			}
			claim := claimOfToken(st.Token)
			ids := granted[fmt.Sprintf("%s/%s@%d", w.id, c.node, c.epoch)]
			if ref, err := ParseTag(st.Tag); err == nil && (ref.Run != w.id || ref.Node != c.node || ref.Epoch != c.epoch) {
				bad("holds the data of %s", st.Tag)
			} else if len(ids) > 0 && claim != "" && !ids[claim] {
				bad("saved with claim %s, not one epoch %d was granted to (%v)", short(claim), c.epoch,
					slices.Sorted(maps.Keys(ids)))
			}
		}
	}
	return out
}
