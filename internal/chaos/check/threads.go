package check

import (
	"slices"
	"strconv"
	"strings"

	"github.com/batonrun/baton/fence"
)

// ThreadInput is what the conversation workload recorded: its submits and
// cancels with their answers, and every checkpoint it read back, sampled
// during the run and read once more at its end. The runs' event streams
// (Input.Runs) hold the rest: when each run started and finished, on
// Redis's clock, and every checkpoint accepted (checkpointed events).
type ThreadInput struct {
	Submits     []Submit         `json:"submits"`
	Cancels     []CancelOp       `json:"cancels"`
	Checkpoints []SeenCheckpoint `json:"checkpoints"`
	// Final lists the (thread, namespace) pairs read at the end, even
	// those found empty: a pair not listed was not read.
	Final []ThreadNS `json:"final"`
	// History is the runners' checkpoint history cap; 0:
	// fence.DefaultCheckpointHistory.
	History int `json:"history,omitempty"`
}

// Submit is one run the conversation workload submitted, and the answer
// its last try got.
type Submit struct {
	Run    string `json:"run"`
	Thread string `json:"thread,omitempty"` // as submitted; "": the run is its own thread
	// Strategy is the multitask strategy submitted ("" without a thread).
	Strategy string `json:"strategy,omitempty"`
	// Outcome: accepted (stored: RUNNING, QUEUED or a replay), busy
	// (fence.ErrThreadBusy), refused (any other refusal), error (no answer).
	Outcome string `json:"outcome"`
	Status  string `json:"status,omitempty"`
	Behind  string `json:"behind,omitempty"`
	Created bool   `json:"created,omitempty"`
	Err     string `json:"err,omitempty"`
	Call    int64  `json:"call"` // UnixNano, the harness's clock
	Ret     int64  `json:"ret"`
}

// Submit outcomes.
const (
	SubmitAccepted = "accepted"
	SubmitBusy     = "busy"
	SubmitRefused  = "refused"
	SubmitError    = "error"
)

// ThreadOf is the thread the run belongs to.
func (s Submit) ThreadOf() string {
	if s.Thread == "" {
		return s.Run
	}
	return s.Thread
}

// CancelOp is one cancel the workload asked for.
type CancelOp struct {
	Run    string `json:"run"`
	Status string `json:"status,omitempty"` // the run's status in the answer
	Err    string `json:"err,omitempty"`
	Call   int64  `json:"call"`
	Ret    int64  `json:"ret"`
}

// SeenCheckpoint is a checkpoint as read back.
type SeenCheckpoint struct {
	fence.Checkpoint
	Seen  int64 `json:"seen"`            // UnixNano when read
	Final bool  `json:"final,omitempty"` // read at the end, after every run ended
}

// ThreadNS names one namespace of one thread.
type ThreadNS struct {
	Thread string `json:"thread"`
	NS     string `json:"ns"`
}

// ThreadFigures sum up the conversation workload.
type ThreadFigures struct {
	Threads int
	// Runs counts accepted runs by strategy ("none": without a thread);
	// Busy the submits refused because the thread was busy.
	Runs, Busy map[string]int
	Queued     int // runs that waited in a thread's queue
	Withdrawn  int // queued runs cancelled before they started
	Cancels    int // cancels asked for
	// Checkpoints are those accepted (checkpointed events); Sampled how
	// many distinct ones were read back with their data.
	Checkpoints, Sampled int
	// Rollbacks are the rolled-back runs the contract says were removed;
	// RolledBackEvents the rolled_back events the store recorded.
	Rollbacks, RolledBackEvents int
	// Resumes are attempt starts whose starting checkpoint was checked;
	// Undecided those that could not be (data never read, or an order
	// within one millisecond of Redis's clock).
	Resumes, Undecided int
}

// trun is one run of a thread as its events tell it; times are ms on
// Redis's clock, 0 when the event is missing.
type trun struct {
	id, thread, strategy string
	behind               string
	submitted            int64
	queued               bool
	start, end, cancel   int64
	cancelReason         string
	status               string
	claims               map[string]map[int64]int64 // node -> epoch -> claimed at
	ends                 map[string]map[int64]int64 // node -> epoch -> first end at
}

// ckEvent is one accepted checkpoint: a checkpointed event.
type ckEvent struct {
	ns      string
	version int64
	run     *trun
	node    string
	epoch   int64
	at      int64
}

func (c *ckEvent) String() string {
	return "v" + strconv.FormatInt(c.version, 10) + " (" + c.run.id + "/" + c.node + "@" +
		strconv.FormatInt(c.epoch, 10) + " at " + stampMS(c.at) + ")"
}

func stampMS(ms int64) string { return stamp(ms * 1e6) }

// runsOfThreads builds each accepted run's timeline from its events.
func runsOfThreads(ti *ThreadInput, runs map[string]RunFinal) (map[string][]*trun, map[string]*trun) {
	byThread := map[string][]*trun{}
	byID := map[string]*trun{}
	for _, s := range ti.Submits {
		if s.Outcome != SubmitAccepted || byID[s.Run] != nil {
			continue
		}
		f, ok := runs[s.Run]
		if !ok || f.Info == nil {
			continue // lost_run says so
		}
		r := &trun{id: s.Run, thread: s.ThreadOf(), strategy: s.Strategy, behind: s.Behind, status: f.Info.Status,
			claims: map[string]map[int64]int64{}, ends: map[string]map[int64]int64{}}
		var started int64
		for _, e := range f.Events {
			at := e.At.UnixMilli()
			switch e.Type {
			case "submitted":
				r.submitted = at
			case "queued":
				r.queued = true
				if b := e.Details["behind"]; b != "" {
					r.behind = b
				}
			case "started":
				if started == 0 {
					started = at
				}
			case "run_finished":
				if r.end == 0 {
					r.end = at
				}
			case "cancel_requested":
				if r.cancel == 0 {
					r.cancel, r.cancelReason = at, e.Details["reason"]
				}
			case "claimed", "takeover":
				note(r.claims, e.Node, e.Epoch, at)
			case "committed", "failed", "released", "cancelled":
				if e.Node != "" && e.Epoch > 0 {
					note(r.ends, e.Node, e.Epoch, at)
				}
			}
		}
		r.start = started
		if started == 0 && !r.queued {
			r.start = r.submitted
		}
		byID[r.id] = r
		byThread[r.thread] = append(byThread[r.thread], r)
	}
	for _, rs := range byThread {
		slices.SortFunc(rs, func(a, b *trun) int { return int(a.submitted - b.submitted) })
	}
	return byThread, byID
}

func note(m map[string]map[int64]int64, node string, epoch, at int64) {
	if m[node] == nil {
		m[node] = map[int64]int64{}
	}
	if old, ok := m[node][epoch]; !ok || at < old {
		m[node][epoch] = at
	}
}

// checkpointsOf lists the accepted checkpoints of the threads' runs, by
// thread and namespace, in version order.
func checkpointsOf(runs map[string]RunFinal, byID map[string]*trun) map[ThreadNS][]*ckEvent {
	out := map[ThreadNS][]*ckEvent{}
	for id, r := range byID {
		for _, e := range runs[id].Events {
			if e.Type != "checkpointed" {
				continue
			}
			v, err := strconv.ParseInt(e.Details["version"], 10, 64)
			if err != nil {
				continue
			}
			k := ThreadNS{r.thread, e.Details["ns"]}
			out[k] = append(out[k], &ckEvent{ns: k.NS, version: v, run: r, node: e.Node, epoch: e.Epoch,
				at: e.At.UnixMilli()})
		}
	}
	for _, cs := range out {
		slices.SortFunc(cs, func(a, b *ckEvent) int { return int(a.version - b.version) })
	}
	return out
}

// targets reports whether a was RUNNING when rb was submitted, so that an
// interrupt or rollback rb cancelled it (and a rollback targets it). sure
// is false when Redis's ms clock cannot tell: a started or ended in the
// very ms of rb's submit, and no cancel reason names rb (the contract's
// cancel, in the submit's step, says "... by run rb").
func targets(rb, a *trun) (running, sure bool) {
	switch {
	case a.start == 0 || a.start > rb.submitted || (a.end != 0 && a.end < rb.submitted):
		return false, true
	case runningAt(a, rb.submitted):
		return true, true
	case a.cancel == rb.submitted && namesRun(a.cancelReason, rb.id):
		return true, true
	}
	return false, false
}

// namesRun reports whether the text names run id as a word.
func namesRun(text, id string) bool {
	for _, w := range strings.Fields(text) {
		if strings.Trim(w, `"'.,;:()`) == id {
			return true
		}
	}
	return false
}
