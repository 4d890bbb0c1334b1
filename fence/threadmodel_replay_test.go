package fence_test

// Replays for TestThreadModel: an accepted call sent again with the same
// identity (claim id, checkpoint id, the same writes), as a client does
// after losing its reply, when the contract fixes the answer.

import (
	"pgregory.net/rapid"

	"github.com/batonrun/baton/fence"
)

// pastOp is an accepted call a client could send again after losing its
// reply.
type pastOp struct {
	kind  string // save, writes, commit, fail, release, claim
	lease fence.Lease
	ns    string
	id    string // checkpoint id
	task  string
	puts  []mPut
	final bool
}

// replay sends an accepted call again with the same identity, as a
// client does after losing its reply.
func (h *harness) replay(rt *rapid.T) {
	var cands []pastOp
	for _, p := range h.past {
		if h.off["replayend"] && p.kind != "save" && p.kind != "writes" && p.kind != "claim" {
			continue
		}
		if h.replayable(p) {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		rt.Skip("nothing to replay")
	}
	p := cands[rapid.IntRange(0, len(cands)-1).Draw(rt, "op")]
	switch p.kind {
	case "save":
		h.logf("save %s ns=%q id=%s by %s again (its reply was lost)", p.lease.Thread, p.ns, p.id, leaseString(p.lease))
		h.doSave(p.lease, p.ns, p.id)
	case "writes":
		h.logf("putWrites %s ns=%q on %s task=%s %v by %s again (its reply was lost)", p.lease.Thread, p.ns, p.id,
			p.task, p.puts, leaseString(p.lease))
		h.doPutWrites(p.lease, p.ns, p.id, p.task, p.puts)
	case "claim":
		h.logf("claim %s/%s by %s again (claim %s; its reply was lost)", p.lease.Run, p.lease.Node, p.lease.Owner, p.lease.ClaimID)
		want := h.m.claim(p.lease.Run, p.lease.Node, p.lease.Owner, p.lease.ClaimID)
		h.expect("claim", h.doClaim(p.lease.Run, p.lease.Node, p.lease.Owner, p.lease.ClaimID, "claim"), want)
	default:
		kind := p.kind
		if p.final {
			kind = "fail-final"
		}
		h.logf("%s %s again (its reply was lost)", kind, leaseString(p.lease))
		h.doEnd(p.lease, kind)
	}
}

// replayable says whether the contract fixes the answer to p sent again.
func (h *harness) replayable(p pastOp) bool {
	l := p.lease
	n := h.m.runs[l.Run].node(l.Node)
	current := n.state == stRunning && n.claim == l.ClaimID
	switch p.kind {
	case "save":
		return h.m.saveReplayable(l, p.ns, p.id)
	case "writes":
		return h.m.findCkpt(l.Thread, p.ns, p.id) != nil && (current || h.m.writesReplay(l, p.ns, p.id, p.task, p.puts))
	case "claim":
		return current
	default:
		e, found := h.m.endings[l.ClaimID]
		return found && e.op == p.kind && e.retries == h.m.runs[l.Run].retries
	}
}
