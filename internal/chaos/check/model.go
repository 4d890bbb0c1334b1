package check

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Node states of the register. Pending is "never claimed, not terminal":
// BLOCKED or READY, which the histories cannot tell apart.
const (
	stPending   = "PENDING"
	stReady     = "READY"
	stRunning   = "RUNNING"
	stSucceeded = "SUCCEEDED"
	stFailed    = "FAILED"
	stCancelled = "CANCELLED"
)

// hiddenClaim is the claim id of a claim the histories never name (a
// continuation whose commit got no reply, or a killed process's last claim).
// No recorded write can match it.
const hiddenClaim = "?"

// reg is the register of one node: what the claim and end scripts compare.
// It is comparable, so porcupine's default equality works on it.
type reg struct {
	St    string
	Epoch int64
	Claim string
	Owner string // the incarnation (Op.Source) of the claim, for phantoms
	// Cancel: the node's run was cancelled while it was RUNNING. Its owner
	// ends it CANCELLED, and so may a claim that finds its lease expired.
	Cancel bool
	// EndClaim: the last 8 fails and releases that ended the node, newest
	// first, as "op:claim=state;..." (the scripts' end_claim, which a
	// later claim keeps): a retry of one of those calls answers as the
	// first time, before the fence, whatever happened to the node since.
	EndClaim string
}

func (r reg) String() string {
	c := ""
	if r.Cancel {
		c = " (run cancelled)"
	}
	if r.Epoch == 0 {
		return r.St + c
	}
	return fmt.Sprintf("%s e%d/%s %s%s", r.St, r.Epoch, short(r.Claim), r.Owner, c)
}

// cancelled is r ended CANCELLED by its run's cancel.
func (r reg) cancelled() reg {
	return reg{St: stCancelled, Epoch: r.Epoch, Claim: r.Claim, Owner: r.Owner, EndClaim: r.EndClaim}
}

func (r reg) terminal() bool { return r.St == stSucceeded || r.St == stFailed || r.St == stCancelled }

// claimable: a claim may succeed from here (RUNNING only as a takeover,
// which the model allows at any time: it cannot know Redis's clock).
func (r reg) claimable() bool { return r.St == stPending || r.St == stReady || r.St == stRunning }

func (r reg) owns(epoch int64, claim string) bool {
	return r.Epoch == epoch && r.Claim == claim && claim != hiddenClaim
}

// expires reports whether an expire naming epoch and claim can end r. An
// expire names the claim it read from the node itself (claim.lua's
// refusal), so it can end a hidden claim of that epoch too: a continuation
// whose commit reply was lost, expired because its holder never heard of it.
func (r reg) expires(epoch int64, claim string) bool {
	return r.owns(epoch, claim) || (r.Epoch == epoch && r.Claim == hiddenClaim)
}

// input is an operation as the model sees it.
type input struct {
	Op      string // claim, heartbeat, commit, fail, release, expire, phantom, park, cancel
	Epoch   int64  // the lease's; claim: the epoch granted
	Claim   string
	Owner   string // incarnation
	Outcome string
	Err     string
	Replay  bool
	End     string
	Synth   string // why the checker added this operation ("" for a recorded one)
	// Rated: the node names a rate limit, so a takeover of it can wait
	// for the rate (refused "not due" while the node is RUNNING).
	Rated bool
}

func (in input) describe() string {
	var b strings.Builder
	if in.Synth != "" {
		b.WriteString("[" + in.Synth + "] ")
	}
	fmt.Fprintf(&b, "%s(e%d/%s) → %s", in.Op, in.Epoch, short(in.Claim), in.Outcome)
	if in.Err != "" {
		b.WriteString(" " + strings.TrimPrefix(in.Err, "fence: "))
	}
	if in.Replay {
		b.WriteString(" replay")
	}
	if in.End != "" {
		b.WriteString(" " + in.End)
	}
	return b.String()
}

// ended is s ended in state st by op under its claim: a fail or a
// release records the claim and the state as end_claim does.
func (s reg) ended(op, st string) reg {
	e := reg{St: st, Epoch: s.Epoch, Claim: s.Claim, Owner: s.Owner, EndClaim: s.EndClaim}
	if op == "fail" || op == "release" {
		entries := []string{op + ":" + s.Claim + "=" + st}
		if s.EndClaim != "" {
			entries = append(entries, strings.Split(s.EndClaim, ";")...)
		}
		e.EndClaim = strings.Join(entries[:min(len(entries), 8)], ";")
	}
	return e
}

// endStates are the states an accepted fail, release or expire may leave.
func endStates(op, end string) []string {
	switch end {
	case "retrying":
		return []string{stReady}
	case "failed":
		return []string{stFailed}
	case "cancelled":
		return []string{stCancelled}
	}
	switch op {
	case "release":
		return []string{stReady, stCancelled}
	case "expire":
		return []string{stFailed, stCancelled}
	}
	return []string{stReady, stFailed, stCancelled}
}

// step returns every register the operation may lead to from s; none means
// the operation is impossible from s.
func step(s reg, in input) []reg {
	switch in.Op {
	case "phantom":
		return phantomStep(s, in)
	case "cancel": // the run's cancel (cancel.lua, or an interrupt's submit)
		switch {
		case s.St == stRunning:
			s.Cancel = true
			return []reg{s}
		case !s.terminal():
			return []reg{s.cancelled()}
		}
		return []reg{s}
	}
	switch in.Outcome {
	case OK:
		return okStep(s, in)
	case Unknown:
		out := []reg{s}
		if in.Op == "claim" {
			if s.claimable() {
				out = append(out, reg{St: stRunning, Epoch: s.Epoch + 1, Claim: in.Claim, Owner: in.Owner,
					Cancel: s.Cancel, EndClaim: s.EndClaim})
			}
			if s.St == stRunning && s.Cancel {
				out = append(out, s.cancelled())
			}
			return out
		}
		if s.St == stRunning && s.owns(in.Epoch, in.Claim) {
			switch in.Op {
			case "commit":
				out = append(out, reg{St: stSucceeded, Epoch: s.Epoch, Claim: s.Claim, Owner: s.Owner, Cancel: false, EndClaim: s.EndClaim})
			case "fail", "release", "expire":
				for _, st := range endStates(in.Op, "") {
					out = append(out, s.ended(in.Op, st))
				}
			}
		}
		return out
	}
	if in.Op == "claim" && s.St == stRunning && s.Cancel &&
		(in.Err == "fence: node done" || in.Err == "fence: run cancelled") {
		// A claim of a cancelled run's node whose lease ran out ends it
		// CANCELLED; one that found the lease live changes nothing.
		return []reg{s, s.cancelled()}
	}
	if refusalFits(s, in) {
		if in.Op == "claim" && in.Err == "fence: node done" && s.St == stPending {
			// Never claimed and now terminal: a dependency failed and the
			// fail script cancelled this node.
			return []reg{{St: stCancelled, Epoch: s.Epoch, Claim: s.Claim, Owner: s.Owner, EndClaim: s.EndClaim}}
		}
		return []reg{s}
	}
	return nil
}

func okStep(s reg, in input) []reg {
	switch in.Op {
	case "claim":
		if s.claimable() && in.Epoch == s.Epoch+1 {
			return []reg{{St: stRunning, Epoch: in.Epoch, Claim: in.Claim, Owner: in.Owner, Cancel: s.Cancel,
				EndClaim: s.EndClaim}}
		}
		if s.St == stRunning && s.owns(in.Epoch, in.Claim) {
			return []reg{s} // a retried claim recognised as its own
		}
	case "heartbeat":
		if s.St == stRunning && s.owns(in.Epoch, in.Claim) {
			return []reg{s}
		}
	case "park":
		// The parked event names the epoch, not the claim: the claim of
		// that epoch parked the node, which waits, then is READY again.
		if s.St == stRunning && s.Epoch == in.Epoch {
			return []reg{s.ended("park", stReady)}
		}
	// A replay answers a call whose earlier run already applied: an earlier
	// call of the same claim, or this same call sent twice (go-redis resends
	// a command whose connection broke, and only the second reply arrives).
	// So a replay may also apply the change itself; what it may never do is
	// apply it on top of a change already made.
	case "commit":
		if s.St == stRunning && s.owns(in.Epoch, in.Claim) {
			return []reg{{St: stSucceeded, Epoch: s.Epoch, Claim: s.Claim, Owner: s.Owner, EndClaim: s.EndClaim}}
		}
		if in.Replay && s.St == stSucceeded && s.owns(in.Epoch, in.Claim) {
			return []reg{s}
		}
	case "fail", "release", "expire":
		var out []reg
		for _, st := range endStates(in.Op, in.End) {
			if s.St == stRunning && (s.owns(in.Epoch, in.Claim) || in.Op == "expire" && s.expires(in.Epoch, in.Claim)) {
				e := s.ended(in.Op, st)
				e.Claim = in.Claim
				out = append(out, e)
			}
			// The same, once the node moved on (claimed again, or its
			// run's cancel ended it): end_claim.
			if in.Op != "expire" && strings.Contains(";"+s.EndClaim+";", ";"+in.Op+":"+in.Claim+"="+st+";") {
				out = append(out, s)
			}
			// fail.lua and release.lua answer a retry of the call that
			// ended the node as they did the first time, and their reply
			// does not say which it was: two concurrent expires of one
			// lease (a duplicate delivery) both answer ok.
			if s.St == st && s.owns(in.Epoch, in.Claim) {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// refusalFits reports whether a refusal is one the scripts could give in s.
// Fencing refusals are checked strictly: a write refused as stale while it
// carried the current epoch and claim id is a bug too (the node would hang
// until its lease ran out). Codes the model does not know are allowed.
func refusalFits(s reg, in input) bool {
	if in.Err == "fence: not found" {
		return true
	}
	if in.Op == "claim" {
		switch in.Err {
		case "fence: node busy", "fence: attempts exhausted", "fence: run cancelled":
			return s.St == stRunning
		case "fence: node done":
			return s.terminal() || s.St == stPending
		case "fence: node not due":
			return s.St == stReady || s.St == stPending || (in.Rated && s.St == stRunning)
		case "fence: node blocked":
			return s.St == stPending
		}
		return true
	}
	switch in.Err {
	case "fence: stale epoch":
		return s.Epoch != in.Epoch
	case "fence: not owner":
		return s.Epoch == in.Epoch && (s.Claim != in.Claim || s.Claim == hiddenClaim)
	case "fence: node not running":
		if !s.owns(in.Epoch, in.Claim) {
			return false
		}
		if in.Op == "commit" {
			return s.St != stRunning && s.St != stSucceeded // a commit would have answered replay
		}
		return s.St != stRunning
	case "fence: lease still active":
		return in.Op == "expire" && s.St == stRunning && s.owns(in.Epoch, in.Claim)
	}
	return true
}

// phantomStep is whatever a killed incarnation may have had in flight when
// its history stopped: nothing, a claim, or an end of its own lease, or an
// expire of another's.
func phantomStep(s reg, in input) []reg {
	out := []reg{s}
	if s.claimable() {
		out = append(out, reg{St: stRunning, Epoch: s.Epoch + 1, Claim: hiddenClaim, Owner: in.Owner, Cancel: s.Cancel,
			EndClaim: s.EndClaim})
	}
	if s.St == stRunning {
		if s.Owner == in.Owner {
			for _, st := range []string{stSucceeded, stReady, stFailed, stCancelled} {
				out = append(out, reg{St: st, Epoch: s.Epoch, Claim: s.Claim, Owner: s.Owner, Cancel: false, EndClaim: s.EndClaim})
			}
		} else {
			out = append(out, reg{St: stFailed, Epoch: s.Epoch, Claim: s.Claim, Owner: s.Owner, Cancel: false, EndClaim: s.EndClaim}, reg{St: stCancelled, Epoch: s.Epoch, Claim: s.Claim, Owner: s.Owner, Cancel: false, EndClaim: s.EndClaim})
		}
	}
	return out
}

// output carries nothing: the outcome is part of input, so that the
// visualisation shows it beside the call.
type output struct{}

// model is the node register as a porcupine model.
func model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{reg{St: stPending}} },
		Step: func(state, in, _ any) []any {
			next := step(state.(reg), in.(input))
			out := make([]any, len(next))
			for i, r := range next {
				out[i] = r
			}
			return out
		},
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			fmt.Fprint(h, state.(reg))
			return h.Sum64()
		},
		DescribeOperation: func(in, _ any) string { return in.(input).describe() },
		DescribeState:     func(state any) string { return state.(reg).String() },
	}
	m := nm.ToModel()
	// ToModel's states are sets; describe them as such.
	m.DescribeState = func(state any) string {
		states := state.([]any)
		parts := make([]string, len(states))
		for i, s := range states {
			parts[i] = s.(reg).String()
		}
		return "{" + strings.Join(parts, " | ") + "}"
	}
	return m
}
