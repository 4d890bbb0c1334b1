package fence

import "time"

// Op is one script call of the ownership protocol as its caller saw it: what
// was asked, when, and what came back. A history of them, from every worker,
// is what a linearizability checker (cmd/chaos) judges the protocol by.
type Op struct {
	Worker string `json:"worker"`
	// Op is claim, heartbeat, commit, fail, release or expire.
	Op     string `json:"op"`
	Thread string `json:"thread"`
	Run    string `json:"run"`
	Node   string `json:"node"`
	// Epoch and Claim are the lease's. For a claim, Claim is the claim id
	// offered and Epoch the epoch granted (0 unless ok); for expire, the
	// expired owner's.
	Epoch   int64  `json:"epoch"`
	Attempt int64  `json:"attempt,omitempty"`
	Claim   string `json:"claim"`
	// Call and Return are wall-clock Unix nanoseconds before the request
	// and after the reply: comparable across processes of one machine.
	Call   int64 `json:"call"`
	Return int64 `json:"ret"`
	// Outcome is "ok" (accepted), "refused" (the script answered with a
	// refusal, Err says which) or "unknown" (no reply: the script may or
	// may not have run).
	Outcome string  `json:"outcome"`
	Err     string  `json:"err,omitempty"`
	Replay  bool    `json:"replay,omitempty"`
	Next    *OpNext `json:"next,omitempty"` // commit: the continuation it claimed
	End     string  `json:"end,omitempty"`  // fail, expire, release: retrying, failed or cancelled
}

// OpNext is the node a commit claimed for its caller in the same step: a
// dependent (a chain's continuation), or a node of another run it took
// from the queue (Continue.Take), whose thread and run it then names.
type OpNext struct {
	Thread string `json:"thread,omitempty"` // "": the commit's own
	Run    string `json:"run,omitempty"`    // "": the commit's own
	Node   string `json:"node"`
	Epoch  int64  `json:"epoch"`
	Claim  string `json:"claim"`
}

// observe reports one finished call to Options.Observer, if any; call it
// deferred with the call's start and a pointer to its error, and fill adds
// what only the reply knows.
func (s *Store) observe(op string, l Lease, call time.Time, errp *error, fill func(*Op)) {
	if s.observer == nil {
		return
	}
	o := Op{Worker: l.Owner, Op: op, Thread: l.Thread, Run: l.Run, Node: l.Node, Epoch: l.Epoch,
		Attempt: l.Attempt, Claim: l.ClaimID, Call: call.UnixNano(), Return: time.Now().UnixNano(), Outcome: "ok"}
	if err := *errp; err != nil {
		o.Outcome, o.Err = "unknown", err.Error()
		if sentinel := refusal(err); sentinel != nil {
			o.Outcome, o.Err = "refused", sentinel.Error()
		}
	}
	if fill != nil && o.Outcome == "ok" {
		fill(&o)
	}
	if op == "claim" && o.Outcome != "ok" {
		o.Epoch, o.Attempt = 0, 0
	}
	s.observer(o)
}
