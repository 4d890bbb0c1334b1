package check

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/batonrun/baton/fence"
)

// partition is the operations on one node.
type partition struct {
	key string
	ops []porcupine.Operation
	// span is the first call and the last return of a recorded operation.
	first, last int64
}

// linearOutcome is what checking the histories found.
type linearOutcome struct {
	partitions int
	ops        int
	phantoms   int      // partitions that needed a phantom operation
	unknown    []string // partitions porcupine could not decide in time
	violations []Violation
}

// checkLinear checks every node's operations against the register model.
// dependents (run -> node -> direct dependents) lets the checker add the
// continuation a commit without a reply may have claimed; nil: none added.
//
// cancels (run -> when its cancel was requested, ms on Redis's clock) adds
// that cancel to each of the run's nodes that has operations: it ends a
// node not RUNNING at once and sets the flag a RUNNING one's owner and
// claimers see. nil: no run was cancelled.
// parkAt is a parked event: the epoch of the claim it ended, and when (ms,
// Redis's clock).
type parkAt struct{ epoch, at int64 }

// parksOf reads every parked event of the runs, by "run/node".
func parksOf(runs map[string]RunFinal) map[string][]parkAt {
	out := map[string][]parkAt{}
	for id, f := range runs {
		for _, e := range f.Events {
			if e.Type == "parked" {
				out[id+"/"+e.Node] = append(out[id+"/"+e.Node], parkAt{epoch: e.Epoch, at: e.At.UnixMilli()})
			}
		}
	}
	return out
}

func checkLinear(ops []Op, faults []Fault, dependents map[string]map[string][]string,
	cancels map[string]int64, parks map[string][]parkAt, rated map[string]bool, timeout time.Duration,
	outDir string) linearOutcome {
	var res linearOutcome
	if len(ops) == 0 {
		return res
	}
	end := int64(0)
	for _, o := range ops {
		end = max(end, o.Ret)
	}
	end++ // an operation without a reply "returns" after everything seen
	parts := map[string]*partition{}
	add := func(key string, in input, call, ret int64, client int, recorded bool) {
		p := parts[key]
		if p == nil {
			p = &partition{key: key, first: call, last: ret}
			parts[key] = p
		}
		if recorded {
			p.first, p.last = min(p.first, call), max(p.last, ret)
		}
		p.ops = append(p.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: output{}, Return: ret})
	}
	clients := map[string]int{}
	clientOf := func(src string) int {
		id, ok := clients[src]
		if !ok {
			id = len(clients)
			clients[src] = id
		}
		return id
	}
	// A replayed commit's continuation was claimed by whichever earlier try
	// of the same commit (same lease and caller) Redis ran: from the first
	// try's call on.
	firstTry := map[string]int64{}
	tryKey := func(o Op) string { return fmt.Sprintf("%s@%d/%s/%s", o.Key(), o.Epoch, o.Claim, o.Source) }
	for _, o := range ops {
		if o.Op == "commit" {
			if t, ok := firstTry[tryKey(o)]; !ok || o.Call < t {
				firstTry[tryKey(o)] = o.Call
			}
		}
	}
	for _, o := range ops {
		if o.Op == "heartbeat" && o.Outcome == Unknown {
			continue // changes nothing whether or not it ran
		}
		in := input{Op: o.Op, Epoch: o.Epoch, Claim: o.Claim, Owner: o.Source, Outcome: o.Outcome,
			Err: o.Err, Replay: o.Replay, End: o.End, Rated: rated[o.Key()]}
		ret := o.Ret
		if o.Outcome == Unknown {
			ret = end
		}
		c := clientOf(o.Source)
		add(o.Key(), in, o.Call, ret, c, true)
		res.ops++
		if o.Op == "claim" && o.Outcome == Refused {
			// go-redis sends a command again when its connection broke:
			// the refusal may answer the second send of a claim whose
			// first send Redis ran (the node then moved on, and the
			// resend found it busy or done).
			add(o.Key(), input{Op: "claim", Claim: o.Claim, Owner: o.Source, Outcome: Unknown,
				Synth: "maybe first send of a refused claim"}, o.Call, o.Ret, c, false)
		}
		if o.Op != "commit" {
			continue
		}
		switch {
		case o.Outcome == OK && o.Next != nil:
			// The continuation is a claim of the dependent, made by this
			// same script call, or for a replay by an earlier try.
			call := o.Call
			if o.Replay {
				call = firstTry[tryKey(o)]
			}
			add(o.NextRun()+"/"+o.Next.Node, input{Op: "claim", Epoch: o.Next.Epoch, Claim: o.Next.Claim,
				Owner: o.Source, Outcome: OK, Synth: "continuation of " + o.Node}, call, o.Ret, c, true)
		case o.Outcome == Unknown || (o.Outcome == OK && o.Replay):
			// The continuation may have been claimed without the caller
			// hearing of it.
			for _, d := range dependents[o.Run][o.Node] {
				add(o.Run+"/"+d, input{Op: "claim", Claim: hiddenClaim, Owner: o.Source, Outcome: Unknown,
					Synth: "maybe continuation of " + o.Node}, o.Call, end, c, false)
			}
		}
	}
	// A commit takes a node of its own shard from the queue
	// (fence.Continue.Take), so one that got no reply, or whose replay
	// named none (what its first try took may have been taken over
	// since), may have claimed any node of that shard unheard of.
	threadOf := map[string]string{}
	takers := map[int][]taker{}
	for _, o := range ops {
		threadOf[o.Key()] = o.Thread
		if o.Op == "commit" && o.Next != nil && o.Next.Run != "" {
			threadOf[o.Next.Run+"/"+o.Next.Node] = o.Next.Thread
		}
		if o.Op == "commit" && (o.Outcome == Unknown || (o.Outcome == OK && o.Replay && o.Next == nil)) {
			sh := fence.ShardOf(o.Thread)
			takers[sh] = append(takers[sh], taker{source: o.Source, client: clientOf(o.Source), call: o.Call, node: o.Key()})
		}
	}
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	res.partitions = len(keys)
	// A run's cancel is no runner's call: it is placed at its time on
	// Redis's clock, which is the machine's clock the histories use, to
	// within the ms it was recorded in.
	for _, k := range keys {
		run, _, _ := strings.Cut(k, "/")
		if at, ok := cancels[run]; ok {
			call := at*int64(time.Millisecond) - int64(2*time.Millisecond)
			add(k, input{Op: "cancel", Outcome: OK, Synth: "the run's cancel"}, call,
				call+int64(5*time.Millisecond), clientOf("cancel"), false)
		}
	}
	// A park is no history line either (the runners record claim,
	// heartbeat, commit, fail, release, expire): it is placed at its
	// parked event's time the same way, ending the claim of its epoch.
	for _, k := range keys {
		for _, pk := range parks[k] {
			call := pk.at*int64(time.Millisecond) - int64(2*time.Millisecond)
			add(k, input{Op: "park", Epoch: pk.epoch, Outcome: OK, Synth: "the parked event"}, call,
				call+int64(5*time.Millisecond), clientOf("park"), false)
		}
	}
	m := model()
	// Most nodes take microseconds; a budget shared by all keeps one
	// pathological node from stalling the report, and the rest from being
	// skipped because of it.
	deadline := time.Now().Add(timeout)
	for _, k := range keys {
		p := parts[k]
		left := time.Until(deadline)
		if left <= 0 {
			res.unknown = append(res.unknown, k)
			continue
		}
		per := min(left, max(timeout/10, time.Second))
		sortOps(p.ops)
		r, info := porcupine.CheckOperationsVerbose(m, p.ops, per)
		if r == porcupine.Ok {
			continue
		}
		// A killed process loses the line of what it had in flight, and a
		// commit without a reply may have taken this node from the queue.
		// Try again with one phantom operation per incarnation killed while
		// this node was in play, and a hidden claim per such commit.
		ph := phantoms(p, faults, clientOf, end)
		ph = append(ph, maybeTaken(p, takers[fence.ShardOf(threadOf[k])], end)...)
		if len(ph) > 0 {
			withPh := append(slices.Clone(p.ops), ph...)
			sortOps(withPh)
			r2, info2 := porcupine.CheckOperationsVerbose(m, withPh, per)
			if r2 == porcupine.Ok {
				res.phantoms++
				continue
			}
			if r2 == porcupine.Illegal || r == porcupine.Unknown {
				r, info = r2, info2
			}
		}
		if r == porcupine.Unknown {
			res.unknown = append(res.unknown, k)
			continue
		}
		run, node, _ := strings.Cut(k, "/")
		v := Violation{Check: "linearizable", Run: run, Node: node,
			Msg: "operations on the node fit no order of the register: " + describeFailure(p.ops, info)}
		if outDir != "" {
			path := filepath.Join(outDir, "porcupine-"+strings.ReplaceAll(k, "/", "_")+".html")
			if err := os.MkdirAll(outDir, 0o755); err == nil {
				if err := porcupine.VisualizePath(m, info, path); err == nil {
					v.Msg += " (visualisation: " + path + ")"
				}
			}
		}
		res.violations = append(res.violations, v)
	}
	return res
}

func sortOps(ops []porcupine.Operation) {
	slices.SortStableFunc(ops, func(a, b porcupine.Operation) int {
		return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return))
	})
}

// phantomReach is how long before a node's first recorded operation a kill
// may have left an unrecorded one: a commit that claimed the node as its
// continuation shows only when the continuation's lease runs out and
// another runner takes it over, a lease and a sweep later.
const phantomReach = 10 * time.Second

// phantoms returns one phantom operation per runner incarnation killed
// before the node's last recorded operation and at most phantomReach before
// its first. The phantom was sent before the kill; its effect may land at
// any time after.
func phantoms(p *partition, faults []Fault, clientOf func(string) int, end int64) []porcupine.Operation {
	var out []porcupine.Operation
	seen := map[string]bool{}
	for _, f := range faults {
		if f.Kind != KindKill || f.Source == "" || seen[f.Source] {
			continue
		}
		if f.Start < p.first-int64(phantomReach) || f.Start > p.last {
			continue
		}
		seen[f.Source] = true
		out = append(out, porcupine.Operation{ClientId: clientOf(f.Source),
			Input: input{Op: "phantom", Owner: f.Source, Outcome: Unknown, Synth: "in flight at SIGKILL"},
			Call:  min(f.Start, p.first) - int64(time.Millisecond), Output: output{}, Return: end})
	}
	return out
}

// taker is a commit that may have taken a node from the queue unheard of.
type taker struct {
	source string
	client int
	call   int64
	node   string // the committed node's key
}

// maybeTaken returns a hidden claim per commit of takers made before the
// node's last recorded operation: the node that commit may have taken, its
// effect landing at any time after the call. No bound before the node's
// first operation: a hidden claim shows only when another runner takes
// the node over, which waits for a free slot (make chaos -seed 31 -runs
// 3000: 25 s after the commit, with every slot full).
func maybeTaken(p *partition, takers []taker, end int64) []porcupine.Operation {
	var out []porcupine.Operation
	for _, t := range takers {
		if t.node == p.key || t.call > p.last {
			continue
		}
		out = append(out, porcupine.Operation{ClientId: t.client,
			Input: input{Op: "claim", Claim: hiddenClaim, Owner: t.source, Outcome: Unknown, Synth: "maybe taken by " + t.node},
			Call:  t.call, Output: output{}, Return: end})
	}
	return out
}

// describeFailure names the operations of the longest partial order porcupine
// found and the first operation it could not place.
func describeFailure(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	best := []int{}
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(best) {
				best = lin
			}
		}
	}
	placed := map[int]bool{}
	var b strings.Builder
	states := []reg{{St: stPending}}
	for _, id := range best {
		placed[id] = true
		var next []reg
		for _, s := range states {
			for _, n := range step(s, ops[id].Input.(input)) {
				if !slices.Contains(next, n) {
					next = append(next, n)
				}
			}
		}
		states = next
	}
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = s.String()
	}
	fmt.Fprintf(&b, "%d of %d placed, register then {%s}", len(best), len(ops), strings.Join(names, " | "))
	// The earliest-called operation left over is usually the culprit.
	for id, op := range ops {
		if !placed[id] {
			fmt.Fprintf(&b, "; cannot place %s (call %s)", op.Input.(input).describe(),
				time.Unix(0, op.Call).Format("15:04:05.000"))
			break
		}
	}
	return b.String()
}
