package check

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/batonrun/baton/fence"
)

// Input is everything a fault run left behind.
type Input struct {
	// Ops are the runners' histories (ReadHistoryDir); empty: the runners
	// wrote none, and only the direct checks run.
	Ops []Op
	// Faults are the faults injected, with their real start and end.
	Faults []Fault
	// Admits are the downstream's guard decisions (ReadAdmits).
	Admits []Admit
	// Submitted are the run ids whose submit was accepted.
	Submitted []string
	// SubmitRefused maps a run id to the error that refused a submit of
	// its one spec for good (retrying the same spec must never conflict).
	SubmitRefused map[string]string
	// Runs are the final states read back from Redis, by run id.
	Runs map[string]RunFinal
	// Dependents maps run -> node -> its direct dependents, from the specs
	// submitted. Optional: without it a commit that got no reply is not
	// assumed to have claimed a continuation.
	Dependents map[string]map[string][]string
	// Bounds are the runners' timing settings.
	Bounds Bounds
	// Workers are the fleet's worker slots, for the takeover check's "no
	// free slot" term; empty: it assumes a slot was always free.
	Workers []Worker
	// OutDir receives porcupine's visualisation of an illegal history;
	// empty: none is written.
	OutDir string
	// Timeout bounds the linearizability search in total. Zero: 2 minutes.
	Timeout time.Duration
	// Threads is what the conversation workload recorded; nil: it did not
	// run, and the thread checks are skipped.
	Threads *ThreadInput
	// Flow is what the limits-and-waits workload recorded; nil: it did
	// not run, and the limit and wait checks are skipped.
	Flow *FlowInput
}

// RunFinal is a run as read back from Redis after the fault run.
type RunFinal struct {
	Info   *fence.RunInfo
	Events []fence.Event
	Err    error // reading it failed (fence.ErrNotFound: it is gone)
}

// Bounds are the timing settings the runners ran with.
type Bounds struct {
	LeaseTTL, Grace, Sweep time.Duration
	// Slack absorbs delivery: the sweeper's enqueue, Asynq's poll, the claim
	// round trip. Zero: 1s.
	Slack time.Duration
}

// Takeover is the bound on the time from an owner's last renewal to the
// claim that took its node over.
func (b Bounds) Takeover() time.Duration {
	slack := b.Slack
	if slack == 0 {
		slack = time.Second
	}
	return b.LeaseTTL + b.Grace + b.Sweep + slack
}

// Worker is one slot of the fleet (a runner id across its restarts): the
// queues it takes deliveries from and how many nodes it runs at once.
type Worker struct {
	ID          string   `json:"id"`
	Queues      []string `json:"queues"`
	Concurrency int      `json:"concurrency"`
}

// Violation is one broken guarantee.
type Violation struct {
	// linearizable, terminal, lost_run, submit, commits, history, admit,
	// takeover, attempts; the thread checks: thread_active, thread_queue,
	// interrupt, rollback, resume, ckpt_version, ckpt_fence, ckpt_lost;
	// the flow checks: limit_held, limit_rate, limit_leak, wait_answer,
	// wait_value.
	Check string
	Run   string
	Node  string
	Msg   string
}

func (v Violation) String() string {
	where := v.Run
	if v.Node != "" {
		where += "/" + v.Node
	}
	if where != "" {
		where = " " + where
	}
	return fmt.Sprintf("[%s]%s: %s", v.Check, where, v.Msg)
}

// Report is what Check found.
type Report struct {
	Violations []Violation
	// Notes are things worth knowing that break no guarantee (no history
	// written, a node porcupine could not decide in time, ...).
	Notes []string

	Ops        int // operations in the histories
	Partitions int // nodes with operations
	Phantoms   int // nodes that needed a phantom operation of a killed process
	Nodes      int // nodes in the runs read back
	Takeovers  int
	// MaxTakeover is the longest takeover, less excluded fault windows.
	MaxTakeover time.Duration
	Admits      int // admitted tokens
	// Threads sums up the conversation workload; nil when it did not run.
	Threads *ThreadFigures
	// Flow sums up the limits-and-waits workload; nil when it did not run.
	Flow *FlowFigures
}

// Check runs every check on in.
func Check(in Input) Report {
	var r Report
	timeout := in.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if len(in.Ops) == 0 {
		r.Notes = append(r.Notes, "no protocol history was written (HISTORY_FILE): linearizability not checked")
	}
	cancels := map[string]int64{}
	for id, f := range in.Runs {
		for _, e := range f.Events {
			if e.Type == "cancel_requested" {
				cancels[id] = e.At.UnixMilli()
				break
			}
		}
	}
	lin := checkLinear(in.Ops, in.Faults, in.Dependents, cancels, parksOf(in.Runs), in.Flow.rated(), timeout, in.OutDir)
	r.Ops, r.Partitions, r.Phantoms = lin.ops, lin.partitions, lin.phantoms
	r.Violations = append(r.Violations, lin.violations...)
	for _, k := range lin.unknown {
		r.Notes = append(r.Notes, "porcupine timed out on "+k+" (not decided)")
	}
	for _, id := range slices.Sorted(maps.Keys(in.SubmitRefused)) {
		r.Violations = append(r.Violations, Violation{Check: "submit", Run: id,
			Msg: "a retried submit of the same spec was refused: " + in.SubmitRefused[id]})
	}
	r.Violations = append(r.Violations, checkRuns(in, &r)...)
	r.Violations = append(r.Violations, checkAdmits(in.Admits, in.Runs, &r)...)
	r.Violations = append(r.Violations, checkTakeovers(in, &r)...)
	r.Violations = append(r.Violations, checkAttempts(in)...)
	r.Violations = append(r.Violations, checkThreads(in, &r)...)
	r.Violations = append(r.Violations, checkLimits(in, &r)...)
	r.Violations = append(r.Violations, checkWaits(in, &r)...)
	return r
}

// checkRuns: every accepted run is found and terminal, and every node has
// exactly one accepted commit, at its final epoch, or none if it did not
// succeed.
func checkRuns(in Input, r *Report) []Violation {
	var out []Violation
	commits := map[string][]Op{} // run/node -> accepted commits, replays included
	maybe := map[string]bool{}   // run/node@epoch -> a commit whose reply was lost
	for _, o := range in.Ops {
		switch {
		case o.Op == "commit" && o.Outcome == OK:
			commits[o.Key()] = append(commits[o.Key()], o)
		case o.Op == "commit" && o.Outcome == Unknown:
			maybe[fmt.Sprintf("%s@%d", o.Key(), o.Epoch)] = true
		}
	}
	for _, id := range in.Submitted {
		f, ok := in.Runs[id]
		switch {
		case !ok:
			out = append(out, Violation{Check: "lost_run", Run: id, Msg: "accepted by submit, never read back"})
			continue
		case f.Err != nil:
			out = append(out, Violation{Check: "lost_run", Run: id, Msg: "accepted by submit, now: " + f.Err.Error()})
			continue
		}
		info := f.Info
		if !terminalStatus(info.Status) {
			var open []string
			for _, n := range info.Nodes {
				if !terminalStatus(n.State) {
					open = append(open, fmt.Sprintf("%s %s e%d owner %s", n.ID, n.State, n.Epoch, n.Owner))
				}
			}
			out = append(out, Violation{Check: "terminal", Run: id,
				Msg: fmt.Sprintf("run %s after the settle window; open nodes: %v", info.Status, open)})
		}
		committed := map[string][]int64{}
		for _, e := range f.Events {
			if e.Type == "committed" {
				committed[e.Node] = append(committed[e.Node], e.Epoch)
			}
		}
		for _, n := range info.Nodes {
			r.Nodes++
			ev := committed[n.ID]
			hist := commits[id+"/"+n.ID]
			switch {
			case n.State == "SUCCEEDED" && (len(ev) != 1 || ev[0] != n.Epoch):
				out = append(out, Violation{Check: "commits", Run: id, Node: n.ID,
					Msg: fmt.Sprintf("SUCCEEDED at epoch %d with committed events at epochs %v", n.Epoch, ev)})
			case n.State != "SUCCEEDED" && len(ev) > 0:
				out = append(out, Violation{Check: "commits", Run: id, Node: n.ID,
					Msg: fmt.Sprintf("%s but committed at epochs %v", n.State, ev)})
			}
			fresh, wrong := 0, false
			for _, o := range hist {
				if !o.Replay {
					fresh++
				}
				wrong = wrong || o.Epoch != n.Epoch || n.State != "SUCCEEDED"
			}
			if fresh > 1 || wrong {
				var seen []string
				for _, o := range hist {
					seen = append(seen, o.String())
				}
				out = append(out, Violation{Check: "commits", Run: id, Node: n.ID,
					Msg: fmt.Sprintf("%s at epoch %d; accepted commits in the histories: %v", n.State, n.Epoch, seen)})
			}
			// A commit whose every try lost its reply may still have been
			// applied: that explains a SUCCEEDED node at its epoch.
			unheard := maybe[fmt.Sprintf("%s/%s@%d", id, n.ID, n.Epoch)]
			if len(in.Ops) > 0 && n.State == "SUCCEEDED" && len(hist) == 0 && !unheard && !killedOwner(in, id, n) {
				out = append(out, Violation{Check: "history", Run: id, Node: n.ID,
					Msg: fmt.Sprintf("committed at epoch %d by %s, but no history holds an accepted commit", n.Epoch, n.Owner)})
			}
		}
	}
	return out
}

// killedOwner: the node's final owner was killed at some point, so the
// history line of its commit may have died with it.
func killedOwner(in Input, run string, n fence.NodeInfo) bool {
	for _, f := range in.Faults {
		if f.Kind == KindKill && f.Target == n.Owner {
			return true
		}
	}
	return false
}

func terminalStatus(s string) bool { return s == "SUCCEEDED" || s == "FAILED" || s == "CANCELLED" }

// checkAdmits: the guard never admitted a token older than one it had
// already admitted for the resource (decided before this one started), never
// two claim ids at one epoch, and never an epoch the store had not issued.
func checkAdmits(admits []Admit, runs map[string]RunFinal, r *Report) []Violation {
	var out []Violation
	byRes := map[string][]Admit{}
	for _, a := range admits {
		if a.Admitted {
			byRes[a.Resource] = append(byRes[a.Resource], a)
			r.Admits++
		}
	}
	finalEpoch := map[string]int64{}
	for _, f := range runs {
		if f.Info == nil {
			continue
		}
		for _, n := range f.Info.Nodes {
			finalEpoch[f.Info.ID+"/"+n.ID] = n.Epoch
		}
	}
	res := make([]string, 0, len(byRes))
	for k := range byRes {
		res = append(res, k)
	}
	slices.Sort(res)
	for _, k := range res {
		as := byRes[k]
		slices.SortFunc(as, func(a, b Admit) int { return int(a.At - b.At) })
		claimAt := map[int64]string{}
		for i, a := range as {
			if c, ok := claimAt[a.Epoch]; ok && c != a.Claim {
				out = append(out, Violation{Check: "admit", Node: k,
					Msg: fmt.Sprintf("admitted two claims at epoch %d: %s and %s", a.Epoch, short(c), short(a.Claim))})
			}
			claimAt[a.Epoch] = a.Claim
			for _, b := range as[:i] {
				if b.Epoch > a.Epoch && b.At < a.Start {
					out = append(out, Violation{Check: "admit", Node: k,
						Msg: fmt.Sprintf("admitted %s at %s after admitting epoch %d at %s", a.Token,
							stamp(a.At), b.Epoch, stamp(b.At))})
					break
				}
			}
			if fe, ok := finalEpoch[a.Run+"/"+a.Node]; ok && a.Epoch > fe {
				out = append(out, Violation{Check: "admit", Node: k,
					Msg: fmt.Sprintf("admitted epoch %d, but the node's epoch is %d", a.Epoch, fe)})
			}
		}
	}
	return out
}

func stamp(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000") }
