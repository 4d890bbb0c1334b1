package check

import (
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
// owner's last renewal, not counting time when Redis was down or the
// claimer's process or link was faulted. The renewal is read from Redis's
// own record (heartbeat_lost's lease_until - LEASE_TTL) and, when later, from
// the histories.
func checkTakeovers(in Input, r *Report) []Violation {
	var out []Violation
	bound := in.Bounds.Takeover()
	lastRenew := renewals(in.Ops)
	for _, id := range sortedRuns(in.Runs) {
		f := in.Runs[id]
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
				excluded := overlap(renewed, at, in.Faults, func(x Fault) bool {
					return x.Kind == KindRedisKill || (x.Target == e.Worker && (x.IsProcess() || x.IsLink()))
				})
				took := time.Duration(at - renewed - excluded)
				r.Takeovers++
				r.MaxTakeover = max(r.MaxTakeover, took)
				if took > bound {
					out = append(out, Violation{Check: "takeover", Run: id, Node: e.Node,
						Msg: fmt.Sprintf("%s took epoch %d over %s after %s's last renewal (%s excluded), bound %s; faults then: %s",
							e.Worker, e.Epoch, took.Round(time.Millisecond), hl.Worker,
							time.Duration(excluded).Round(time.Millisecond), bound, faultsIn(in.Faults, renewed, at))})
				}
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
				note(o.Run, o.Next.Node, o.Next.Epoch, o.Ret)
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

// overlap is how much of [from, to] the windows of the faults that match
// cover (windows merged, each extended by windowTail).
func overlap(from, to int64, faults []Fault, match func(Fault) bool) int64 {
	type span struct{ a, b int64 }
	var spans []span
	for _, f := range faults {
		if !match(f) {
			continue
		}
		a, b := max(f.Start, from), min(f.End+int64(windowTail), to)
		if a < b {
			spans = append(spans, span{a, b})
		}
	}
	slices.SortFunc(spans, func(x, y span) int { return int(x.a - y.a) })
	var total, curA, curB int64
	for i, s := range spans {
		switch {
		case i == 0:
			curA, curB = s.a, s.b
		case s.a <= curB:
			curB = max(curB, s.b)
		default:
			total += curB - curA
			curA, curB = s.a, s.b
		}
	}
	if len(spans) > 0 {
		total += curB - curA
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
