package check

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// FlowInput is what the limits-and-waits workload recorded: the limits it
// set (as an operator would), which nodes named which of them, and every
// resume it sent with the answer it got. The runs' event streams
// (Input.Runs) hold the rest: every claim, takeover and end of an attempt,
// every park and resume, on Redis's clock.
type FlowInput struct {
	Limits []FlowLimit `json:"limits"`
	// Uses maps "run/node" to the limits the node names.
	Uses map[string][]string `json:"uses"`
	// Parks lists the "run/node" of the nodes that park (exec nodes that
	// print ::wait until they are resumed).
	Parks   []string   `json:"parks,omitempty"`
	Resumes []ResumeOp `json:"resumes,omitempty"`
	// Changes are the concurrency changes the workload made after setting
	// Limits, in order: an operator lowering and raising a limit.
	Changes []LimitSet `json:"changes,omitempty"`
	// End is each limit's use read at the end, after every run ended and
	// the fleet stopped (enqueue limit list); nil: not read.
	End []LimitEnd `json:"end,omitempty"`
}

// LimitEnd is a limit's use as read at the end.
type LimitEnd struct {
	Name    string `json:"name"`
	InUse   int    `json:"in_use"`
	Waiting int    `json:"waiting"`
}

// LimitSet is one change of a limit's concurrency, made between Call and
// Ret (UnixNano, the harness's clock, which is Redis's machine's).
type LimitSet struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	Call        int64  `json:"call"`
	Ret         int64  `json:"ret"`
}

// rated returns the "run/node" of the nodes that name a rate limit: a
// claim of such a node can be refused "not due" by the rate, a takeover
// of its expired lease too.
func (fl *FlowInput) rated() map[string]bool {
	out := map[string]bool{}
	if fl == nil {
		return out
	}
	rates := map[string]bool{}
	for _, l := range fl.Limits {
		rates[l.Name] = l.Rate > 0
	}
	for k, names := range fl.Uses {
		out[k] = slices.ContainsFunc(names, func(n string) bool { return rates[n] })
	}
	return out
}

// FlowLimit is a limit as set: at most Concurrency holders (0: none), at
// most Rate claims per Period plus Burst (Rate 0: none).
type FlowLimit struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	PeriodMS    int64  `json:"period_ms,omitempty"`
	Burst       int    `json:"burst,omitempty"`
}

// ResumeOp is one resume the workload sent, and what it got back.
type ResumeOp struct {
	Run  string          `json:"run"`
	Node string          `json:"node"`
	Wait string          `json:"wait"`
	Sent json.RawMessage `json:"sent"`
	// Why: first, retry (the same value again, as after a lost reply),
	// second (another value: a second person answering).
	Why string `json:"why"`
	// Outcome: answered (Answer holds the wait's answer), refused (Err),
	// error (no answer: Redis unreachable, the reply lost).
	Outcome string          `json:"outcome"`
	Answer  json.RawMessage `json:"answer,omitempty"`
	Replay  bool            `json:"replay,omitempty"`
	Err     string          `json:"err,omitempty"`
	Call    int64           `json:"call"`
	Ret     int64           `json:"ret"`
}

// Resume outcomes.
const (
	ResumeAnswered = "answered"
	ResumeRefused  = "refused"
	ResumeError    = "error"
)

// FlowFigures sums up the limits-and-waits workload.
type FlowFigures struct {
	Claims    map[string]int // claims and takeovers of nodes naming each limit
	MaxHeld   map[string]int // most holders of each concurrency limit at once
	Parks     int            // parked events
	Resumed   int            // resumed events
	ResumeOps int            // resume calls sent, retries and second answers included
	Replays   int            // resume calls answered as a replay
	Changes   int            // limit changes made while the runs went
}

// limitChange is one event that starts or ends a node's hold of its slots.
type limitChange struct {
	at    int64 // ms, Redis's clock
	start bool
	key   string // run/node
	typ   string
	epoch int64
}

// holdChanges reads, from every run's events, the claims (claimed,
// takeover) and the ends of attempts (committed, failed, released, parked,
// cancelled) of the nodes that name a limit.
func holdChanges(in Input, uses map[string][]string) []limitChange {
	var out []limitChange
	for _, id := range sortedRuns(in.Runs) {
		for _, e := range in.Runs[id].Events {
			k := id + "/" + e.Node
			if e.Node == "" || len(uses[k]) == 0 {
				continue
			}
			c := limitChange{at: e.At.UnixMilli(), key: k, typ: e.Type, epoch: e.Epoch}
			switch e.Type {
			case "claimed", "takeover":
				c.start = true
			case "committed", "failed", "released", "parked", "cancelled":
			default:
				continue
			}
			out = append(out, c)
		}
	}
	// Ends before starts at the same millisecond: a slot freed and claimed
	// by a woken waiter in one millisecond is not two holders. Events of
	// one run keep their stream order.
	slices.SortStableFunc(out, func(a, b limitChange) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		if a.start != b.start {
			if a.start {
				return 1
			}
			return -1
		}
		return 0
	})
	return out
}

// checkLimits: at no instant on Redis's clock did more nodes hold a
// concurrency limit than it allows, counting a node from its claim (or
// takeover, which moves its slot) to the end of that attempt (commit,
// fail, release, park, cancel); and in no window of a rate's period did
// more than rate + burst claims of nodes naming it happen.
func checkLimits(in Input, r *Report) []Violation {
	fl := in.Flow
	if fl == nil {
		return nil
	}
	fig := &FlowFigures{Claims: map[string]int{}, MaxHeld: map[string]int{}, Changes: len(fl.Changes)}
	r.Flow = fig
	var out []Violation
	changes := holdChanges(in, fl.Uses)
	for _, l := range fl.Limits {
		var mine []limitChange
		for _, c := range changes {
			if slices.Contains(fl.Uses[c.key], l.Name) {
				mine = append(mine, c)
			}
		}
		var claims []int64
		for _, c := range mine {
			if c.start {
				claims = append(claims, c.at)
			}
		}
		fig.Claims[l.Name] = len(claims)
		if l.Concurrency > 0 {
			out = append(out, overHeld(l, limitAt(l, fl.Changes), mine, fig)...)
		}
		if l.Rate > 0 && l.PeriodMS > 0 {
			out = append(out, overRate(l, claims)...)
		}
	}
	return append(out, leakedSlots(in)...)
}

// leakedSlots: once every run naming a limit has ended, none of its slots
// is held: every ended claim freed its slot (a claim whose end frees
// nothing holds it forever, and every later node under the limit waits).
func leakedSlots(in Input) []Violation {
	var out []Violation
	for _, e := range in.Flow.End {
		if e.InUse == 0 {
			continue
		}
		var open []string
		for _, k := range sortedNames(in.Flow.Uses) {
			run, _, _ := strings.Cut(k, "/")
			f, ok := in.Runs[run]
			if ok && slices.Contains(in.Flow.Uses[k], e.Name) && (f.Info == nil || !terminalStatus(f.Info.Status)) {
				open = append(open, run)
			}
		}
		if len(open) > 0 {
			continue // a run still open may hold it
		}
		out = append(out, Violation{Check: "limit_leak",
			Msg: fmt.Sprintf("limit %s: %d slots held and %d waiting at the end, with every run naming it ended", e.Name, e.InUse, e.Waiting)})
	}
	return out
}

// limitAt returns the concurrency of l in effect at a time (ms, Redis's
// clock): as set first, then as each change made it once its call
// returned, and, while a change was in flight, the larger of the two.
// Lowering a limit takes no slot away: it holds from the next claim on.
func limitAt(l FlowLimit, changes []LimitSet) func(ms int64) int {
	var mine []LimitSet
	for _, c := range changes {
		if c.Name == l.Name {
			mine = append(mine, c)
		}
	}
	return func(ms int64) int {
		at := ms * int64(time.Millisecond)
		cur := l.Concurrency
		for _, c := range mine {
			switch {
			case c.Ret < at:
				cur = c.Concurrency
			case c.Call <= at+int64(time.Millisecond):
				return max(cur, c.Concurrency)
			default:
				return cur
			}
		}
		return cur
	}
}

// overHeld replays the holds of one concurrency limit and reports each
// episode in which a claim made more holders than the limit then allowed,
// once, with who held.
func overHeld(l FlowLimit, limit func(ms int64) int, changes []limitChange, fig *FlowFigures) []Violation {
	var out []Violation
	held := map[string]limitChange{}
	over := false
	for _, c := range changes {
		if !c.start {
			delete(held, c.key)
			over = over && len(held) > limit(c.at)
			continue
		}
		_, had := held[c.key]
		held[c.key] = c // a takeover moves the node's slot: still one
		fig.MaxHeld[l.Name] = max(fig.MaxHeld[l.Name], len(held))
		if had || len(held) <= limit(c.at) || over {
			continue
		}
		over = true
		var who []string
		for _, k := range sortedNames(held) {
			h := held[k]
			who = append(who, fmt.Sprintf("%s (%s e%d at %s)", k, h.typ, h.epoch, stampMS(h.at)))
		}
		run, node, _ := strings.Cut(c.key, "/")
		if len(out) == 10 {
			out = append(out, Violation{Check: "limit_held", Msg: fmt.Sprintf("limit %s: more episodes over it not listed", l.Name)})
			break
		}
		out = append(out, Violation{Check: "limit_held", Run: run, Node: node,
			Msg: fmt.Sprintf("limit %s (concurrency %d) held by %d at %s: %s", l.Name, limit(c.at), len(held),
				stampMS(c.at), strings.Join(who, ", "))})
	}
	return out
}

// overRate reports the first window of one period holding more than
// rate + burst claims. GCRA admits at most burst+1 at once and one more
// per period/rate, so any rate+burst+1 claims span a whole period: read
// in whole milliseconds (TIME floored), at least period ms apart.
func overRate(l FlowLimit, claims []int64) []Violation {
	most := l.Rate + l.Burst
	for i, j := 0, 0; j < len(claims); j++ {
		for claims[j]-claims[i] >= l.PeriodMS {
			i++
		}
		if j-i+1 > most {
			return []Violation{{Check: "limit_rate", Msg: fmt.Sprintf("limit %s (%d per %s, burst %d): %d claims from %s to %s",
				l.Name, l.Rate, time.Duration(l.PeriodMS)*time.Millisecond, l.Burst, j-i+1, stampMS(claims[i]), stampMS(claims[j]))}}
		}
	}
	return nil
}

// checkWaits: each wait was answered once. Redis recorded at most one
// resumed event per wait id; every answer the workload got for a wait
// (the first, a retry after a lost reply, a second person's) is the same
// value, only one of them not a replay, and none refused; and a node that
// parked and then succeeded consumed that value: its result names its last
// wait and the answer, and it never parked again after an answered wait.
func checkWaits(in Input, r *Report) []Violation {
	fl := in.Flow
	if fl == nil {
		return nil
	}
	fig := r.Flow
	var out []Violation
	type wait struct {
		run, node string
		parks     int // parked events naming it
		resumed   int
	}
	waits := map[string]*wait{}
	lastWait := map[string]string{} // run/node -> its last parked wait id
	parksOf := map[string][]string{}
	for _, id := range sortedRuns(in.Runs) {
		for _, e := range in.Runs[id].Events {
			wid := e.Details["wait_id"]
			if (e.Type != "parked" && e.Type != "resumed") || wid == "" {
				continue
			}
			w := waits[wid]
			if w == nil {
				w = &wait{run: id, node: e.Node}
				waits[wid] = w
			}
			k := id + "/" + e.Node
			if e.Type == "parked" {
				fig.Parks++
				w.parks++
				lastWait[k] = wid
				parksOf[k] = append(parksOf[k], wid)
			} else {
				fig.Resumed++
				w.resumed++
			}
		}
	}
	for _, wid := range sortedNames(waits) {
		if w := waits[wid]; w.resumed > 1 {
			out = append(out, Violation{Check: "wait_answer", Run: w.run, Node: w.node,
				Msg: fmt.Sprintf("wait %s resumed %d times", wid, w.resumed)})
		}
	}
	byWait := map[string][]ResumeOp{}
	for _, op := range fl.Resumes {
		byWait[op.Wait] = append(byWait[op.Wait], op)
		fig.ResumeOps++
		if op.Replay {
			fig.Replays++
		}
	}
	answers := map[string]json.RawMessage{} // wait id -> its answer
	for _, wid := range sortedNames(byWait) {
		ops := byWait[wid]
		fresh := 0
		for _, op := range ops {
			switch op.Outcome {
			case ResumeRefused:
				out = append(out, Violation{Check: "wait_answer", Run: op.Run, Node: op.Node,
					Msg: fmt.Sprintf("resume (%s) of wait %s refused at %s: %s", op.Why, wid, stamp(op.Ret), op.Err)})
			case ResumeAnswered:
				if !op.Replay {
					fresh++
				}
				if a, ok := answers[wid]; !ok {
					answers[wid] = op.Answer
				} else if !sameJSON(a, op.Answer) {
					out = append(out, Violation{Check: "wait_answer", Run: op.Run, Node: op.Node,
						Msg: fmt.Sprintf("wait %s answered %s, then %s (%s at %s)", wid, a, op.Answer, op.Why, stamp(op.Ret))})
				}
			}
		}
		if fresh > 1 {
			out = append(out, Violation{Check: "wait_answer", Run: ops[0].Run, Node: ops[0].Node,
				Msg: fmt.Sprintf("wait %s: %d resumes answered as the first", wid, fresh)})
		}
	}
	for _, k := range fl.Parks {
		run, node, _ := strings.Cut(k, "/")
		f, ok := in.Runs[run]
		if !ok || f.Info == nil {
			continue
		}
		parks := parksOf[k]
		for i, wid := range parks[:max(len(parks)-1, 0)] {
			if w := waits[wid]; w != nil && w.resumed > 0 {
				out = append(out, Violation{Check: "wait_value", Run: run, Node: node,
					Msg: fmt.Sprintf("parked again (wait %s) after wait %s was answered: the answer was not read", parks[i+1], wid)})
			}
		}
		for _, n := range f.Info.Nodes {
			if n.ID != node || n.State != "SUCCEEDED" {
				continue
			}
			wid := lastWait[k]
			var res struct {
				Answer json.RawMessage `json:"answer"`
				Wait   string          `json:"wait"`
			}
			_ = json.Unmarshal(n.Result, &res)
			switch a, answered := answers[wid]; {
			case wid == "":
				out = append(out, Violation{Check: "wait_value", Run: run, Node: node,
					Msg: fmt.Sprintf("SUCCEEDED without ever parking: %s", n.Result)})
			case res.Wait != wid:
				out = append(out, Violation{Check: "wait_value", Run: run, Node: node,
					Msg: fmt.Sprintf("SUCCEEDED with %s, but its last wait was %s", n.Result, wid)})
			case answered && !sameJSON(a, res.Answer):
				out = append(out, Violation{Check: "wait_value", Run: run, Node: node,
					Msg: fmt.Sprintf("SUCCEEDED with answer %s, but wait %s was answered %s", res.Answer, wid, a)})
			}
		}
	}
	return out
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
