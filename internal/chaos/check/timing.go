package check

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonrun/baton/fence"
)

// windowTail extends every fault window: after a link heals or Redis is
// back, clients reconnect and Asynq's dequeue loop backs off before it
// fetches again.
const windowTail = time.Second

// checkTakeovers: every takeover came within Bounds.Takeover of the previous
// owner's last renewal, not counting time when Redis was down, the
// claimer's process or link was faulted, or, after the sweep interval in
// which the node was handed out, no worker serving its queue had a free
// slot. The renewal is read from Redis's own record (heartbeat_lost's
// lease_until - LEASE_TTL) and, when later, from the histories.
//
// The free slot is a real term, not slack: a takeover is a delivery like
// any other, and a delivery waits until a handler of a live worker that
// serves the queue is free. A worker whose every slot (its Concurrency)
// holds a lease cannot take it, however early the sweeper enqueued it;
// and a slot whose node commits may go straight on to the node's
// dependent (a chain's continuation skips the queue), so it never frees
// for the waiting takeover. A runner stopped while holding several leases
// makes as many takeovers wait in turn when the others are full (seed 2:
// r2 stopped holding three; the sweeper enqueued them together, and the
// third waited 1.16 s for the third of eight busy slots of r1 and r3 to
// free, 48 ms past the bound). Busy is read from the histories, from a
// lease's first call to the first commit, fail, release or expire of it
// (the handler has returned by then: a retry after a lost reply is not
// counted), so it is no longer than the handler ran, except for a commit
// Asynq never acknowledged, which waits up to min(1s, LEASE_TTL/4). The
// term counts only while every worker serving the queue was full or
// faulted: a dequeue that idles beside a free slot still fails the check.
func checkTakeovers(in Input, r *Report) []Violation {
	var out []Violation
	bound := in.Bounds.Takeover()
	lastRenew := renewals(in.Ops)
	full := fullQueues(in)
	for _, id := range sortedRuns(in.Runs) {
		f := in.Runs[id]
		queueOf := map[string]string{}
		if f.Info != nil {
			for _, n := range f.Info.Nodes {
				queueOf[n.ID] = cmp.Or(n.Queue, "default")
			}
		}
		lost := map[string]fence.Event{} // node -> its last heartbeat_lost
		for _, e := range f.Events {
			switch e.Type {
			case "heartbeat_lost":
				lost[e.Node] = e
			case "takeover":
				hl, ok := lost[e.Node]
				if !ok || hl.Epoch != e.Epoch-1 {
					continue
				}
				until, err := strconv.ParseInt(hl.Details["lease_until"], 10, 64)
				if err != nil {
					continue
				}
				renewed := time.UnixMilli(until).Add(-in.Bounds.LeaseTTL).UnixNano()
				renewed = max(renewed, lastRenew[fmt.Sprintf("%s/%s@%d", id, e.Node, hl.Epoch)])
				at := e.At.UnixNano()
				if at <= renewed {
					continue
				}
				faulted := faultSpans(in.Faults, func(x Fault) bool {
					return x.Kind == KindRedisKill || (x.Target == e.Worker && (x.IsProcess() || x.IsLink()))
				})
				// Enqueued by then (Sweep covers the hand-out): only a full
				// fleet after it delays the delivery.
				queued := renewed + int64(in.Bounds.LeaseTTL+in.Bounds.Grace+in.Bounds.Sweep)
				busy := clip(full[queueOf[e.Node]], queued, at)
				excluded := measure(union(faulted, busy), renewed, at)
				took := time.Duration(at - renewed - excluded)
				r.Takeovers++
				r.MaxTakeover = max(r.MaxTakeover, took)
				if took > bound {
					out = append(out, Violation{Check: "takeover", Run: id, Node: e.Node,
						Msg: fmt.Sprintf("%s took epoch %d over %s after %s's last renewal (%s excluded, %s of it no free slot), bound %s; faults then: %s",
							e.Worker, e.Epoch, took.Round(time.Millisecond), hl.Worker,
							time.Duration(excluded).Round(time.Millisecond),
							time.Duration(measure(busy, renewed, at)).Round(time.Millisecond),
							bound, faultsIn(in.Faults, renewed, at))})
				}
			}
		}
	}
	return out
}

// fullQueues maps each queue the workers serve to the spans when none of
// them could take a delivery from it: each one's slots all held by leases
// (busySpans) or its process or link faulted.
func fullQueues(in Input) map[string][]span {
	busy := busySpans(in.Ops, in.Workers)
	out := map[string][]span{}
	seen := map[string]bool{}
	for _, w := range in.Workers {
		for _, q := range w.Queues {
			if seen[q] {
				continue
			}
			seen[q] = true
			var all []span
			first := true
			for _, v := range in.Workers {
				if !slices.Contains(v.Queues, q) {
					continue
				}
				down := union(busy[v.ID], faultSpans(in.Faults, func(x Fault) bool {
					return x.Target == v.ID && (x.IsProcess() || x.IsLink())
				}))
				if first {
					all, first = down, false
				} else {
					all = intersect(all, down)
				}
			}
			out[q] = all
		}
	}
	return out
}

// busySpans maps each worker to the spans when all its slots held a
// lease. A lease holds a slot from its claim (or the commit whose
// continuation claimed it) to its first commit, fail, release or expire,
// whatever the outcome: the handler returns then, and a retry of that call
// after a lost reply no longer holds the slot. A lease with none of those
// (its process killed) ends at its last call.
func busySpans(ops []Op, workers []Worker) map[string][]span {
	type lease struct {
		worker   string
		from, to int64
		ended    bool
	}
	leases := map[string]*lease{}
	note := func(o Op, run, node string, epoch, at int64, ends bool) {
		k := fmt.Sprintf("%s %s/%s@%d", o.Source, run, node, epoch)
		l := leases[k]
		if l == nil {
			l = &lease{worker: o.Worker, from: at, to: at}
			leases[k] = l
		}
		if l.ended {
			return
		}
		l.from, l.to, l.ended = min(l.from, at), max(l.to, at), ends
	}
	for _, o := range ops {
		switch o.Op {
		case "claim":
			if o.Outcome == OK {
				note(o, o.Run, o.Node, o.Epoch, o.Call, false)
			}
		case "heartbeat":
			note(o, o.Run, o.Node, o.Epoch, o.Call, false)
		case "commit", "fail", "release", "expire":
			note(o, o.Run, o.Node, o.Epoch, o.Call, true)
			if o.Op == "commit" && o.Outcome == OK && o.Next != nil {
				note(o, o.NextRun(), o.Next.Node, o.Next.Epoch, o.Call, false)
			}
		}
	}
	type step struct {
		at int64
		d  int
	}
	steps := map[string][]step{}
	for _, l := range leases {
		if l.to > l.from {
			steps[l.worker] = append(steps[l.worker], step{l.from, 1}, step{l.to, -1})
		}
	}
	out := map[string][]span{}
	for _, w := range workers {
		if w.Concurrency <= 0 {
			continue // unknown: never taken for full
		}
		s := steps[w.ID]
		// Ends before starts at the same instant: a slot handed from one
		// lease to the next is not counted twice.
		slices.SortFunc(s, func(a, b step) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.d, b.d)) })
		n, from := 0, int64(0)
		for _, x := range s {
			was := n >= w.Concurrency
			n += x.d
			switch now := n >= w.Concurrency; {
			case now && !was:
				from = x.at
			case was && !now && x.at > from:
				out[w.ID] = append(out[w.ID], span{from, x.at})
			}
		}
	}
	return out
}

// renewals maps "run/node@epoch" to the latest return of an accepted claim,
// continuation or heartbeat of that epoch.
func renewals(ops []Op) map[string]int64 {
	out := map[string]int64{}
	note := func(run, node string, epoch, ret int64) {
		k := fmt.Sprintf("%s/%s@%d", run, node, epoch)
		out[k] = max(out[k], ret)
	}
	for _, o := range ops {
		if o.Outcome != OK {
			continue
		}
		switch o.Op {
		case "claim", "heartbeat":
			note(o.Run, o.Node, o.Epoch, o.Ret)
		case "commit":
			if o.Next != nil {
				note(o.NextRun(), o.Next.Node, o.Next.Epoch, o.Ret)
			}
		}
	}
	return out
}

// checkAttempts: a node that FAILED with "no attempts left" lost each of the
// attempts that ran out to a fault that explains it: its owner's process
// killed, stopped or drained, Redis down, or its owner's link cut for at
// least half a lease (a partition that long is a lost lease by design, like
// a pause). Lost replies, resets and short stalls must cost no attempt: the
// scripts recognise a retried call.
func checkAttempts(in Input) []Violation {
	var out []Violation
	for _, id := range sortedRuns(in.Runs) {
		f := in.Runs[id]
		if f.Info == nil {
			continue
		}
		for _, n := range f.Info.Nodes {
			if n.State != "FAILED" || !strings.Contains(n.Error, "no attempts left") {
				continue
			}
			type attempt struct {
				owner     string
				start, to int64
			}
			claims := map[int64]attempt{}
			var lostOnes []attempt
			for _, e := range f.Events {
				if e.Node != n.ID {
					continue
				}
				switch {
				case e.Type == "claimed" || e.Type == "takeover":
					claims[e.Epoch] = attempt{owner: e.Worker, start: e.At.UnixNano()}
				case e.Type == "heartbeat_lost" ||
					(e.Type == "failed" && strings.Contains(e.Details["error"], "no attempts left")):
					if a, ok := claims[e.Epoch]; ok {
						a.to = e.At.UnixNano()
						lostOnes = append(lostOnes, a)
					}
				}
			}
			var unexplained []string
			for _, a := range lostOnes {
				explained := slices.ContainsFunc(in.Faults, func(x Fault) bool {
					if x.Start > a.to || x.End+int64(windowTail) < a.start {
						return false
					}
					switch {
					case x.Kind == KindRedisKill:
						return true
					case x.Target != a.owner:
						return false
					case x.IsProcess():
						return true
					case x.Kind == KindStall || x.Kind == KindBlackhole:
						return time.Duration(x.End-x.Start) >= in.Bounds.LeaseTTL/2
					}
					return false
				})
				if !explained {
					unexplained = append(unexplained, fmt.Sprintf("attempt of %s from %s to %s (faults then: %s)",
						a.owner, stamp(a.start), stamp(a.to), faultsIn(in.Faults, a.start, a.to)))
				}
			}
			if len(unexplained) > 0 {
				out = append(out, Violation{Check: "attempts", Run: id, Node: n.ID,
					Msg: fmt.Sprintf("FAILED (%s) after %d of %d attempts; lost with no process fault of the owner: %s",
						n.Error, n.Attempt, n.MaxAttempts, strings.Join(unexplained, "; "))})
			}
		}
	}
	return out
}

// span is a time interval [a, b), UnixNano.
type span struct{ a, b int64 }

// faultSpans are the windows of the faults that match, each extended by
// windowTail, merged.
func faultSpans(faults []Fault, match func(Fault) bool) []span {
	var out []span
	for _, f := range faults {
		if match(f) {
			out = append(out, span{f.Start, f.End + int64(windowTail)})
		}
	}
	return union(out)
}

// union merges spans into sorted, disjoint ones.
func union(sets ...[]span) []span {
	var all []span
	for _, s := range sets {
		all = append(all, s...)
	}
	slices.SortFunc(all, func(x, y span) int { return cmp.Compare(x.a, y.a) })
	var out []span
	for _, s := range all {
		if s.b <= s.a {
			continue
		}
		if n := len(out); n > 0 && s.a <= out[n-1].b {
			out[n-1].b = max(out[n-1].b, s.b)
			continue
		}
		out = append(out, s)
	}
	return out
}

// intersect is the time both x and y cover; both sorted and disjoint.
func intersect(x, y []span) []span {
	var out []span
	for i, j := 0, 0; i < len(x) && j < len(y); {
		if a, b := max(x[i].a, y[j].a), min(x[i].b, y[j].b); a < b {
			out = append(out, span{a, b})
		}
		if x[i].b < y[j].b {
			i++
		} else {
			j++
		}
	}
	return out
}

// clip is the part of spans within [from, to].
func clip(spans []span, from, to int64) []span {
	var out []span
	for _, s := range spans {
		if a, b := max(s.a, from), min(s.b, to); a < b {
			out = append(out, span{a, b})
		}
	}
	return out
}

// measure is how much of [from, to] the sorted, disjoint spans cover.
func measure(spans []span, from, to int64) int64 {
	var total int64
	for _, s := range clip(spans, from, to) {
		total += s.b - s.a
	}
	return total
}

// faultsIn lists the faults active in [from, to], for messages.
func faultsIn(faults []Fault, from, to int64) string {
	var s []string
	for _, f := range faults {
		if f.Start <= to && f.End+int64(windowTail) >= from && f.Kind != KindDuplicate {
			s = append(s, fmt.Sprintf("%s %s %s+%s", f.Kind, f.Target, stamp(f.Start),
				time.Duration(f.End-f.Start).Round(time.Millisecond)))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func sortedRuns(runs map[string]RunFinal) []string {
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
