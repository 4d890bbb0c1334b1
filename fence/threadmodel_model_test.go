package fence_test

// The reference model of threads for TestThreadModel: what
// /work/threads-spec.md (issue 29's contract) says a fence.Store holds after
// each operation, in plain Go maps. It knows nothing of Redis or of the
// scripts; where the contract leaves a choice to the implementation, the
// model marks the state it cannot predict as optional (a cancelled run
// left in a queue, a checkpoint past the history cap that no run can roll
// back to any more) and the comparison accepts both.

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/batonrun/baton/fence"
)

const (
	stRunning   = "RUNNING"
	stQueued    = "QUEUED"
	stSucceeded = "SUCCEEDED"
	stFailed    = "FAILED"
	stCancelled = "CANCELLED"
	stReady     = "READY"
	stBlocked   = "BLOCKED"
)

func ended(status string) bool {
	return status == stSucceeded || status == stFailed || status == stCancelled
}

type mNode struct {
	id       string
	deps     []string
	state    string
	epoch    int64
	claim    string
	owner    string
	attempt  int64
	releases int64
	max      int64
}

type mRun struct {
	id         string
	thread     string // the run's thread: its own id when threadless
	threadless bool
	strategy   string
	digest     string
	status     string
	cancel     bool
	nodes      []*mNode
	target     string // rollback target: the run active and RUNNING at submit
	retryIDs   map[string]bool
	retries    int // how many retries applied (a replay of a node end before one is unambiguous)
}

func (r *mRun) node(id string) *mNode {
	for _, n := range r.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

type mThread struct {
	active string // the active-run key; "" when absent
	queue  []string
}

type mWrite struct {
	value string
	run   string
	claim string
}

type mCkpt struct {
	version  int64
	id       string
	run      string
	node     string
	worker   string
	claim    string
	epoch    int64
	writes   map[string]mWrite // "task|idx"
	optional bool              // past the cap and no longer an anchor: may be trimmed at any time
}

// mCk is one thread's checkpoint state. Each namespace's checkpoints and
// pending writes expire together, the retention after its last write; the
// counters expire the retention after the last write to any namespace.
type mCk struct {
	counters map[string]int64
	ns       map[string][]*mCkpt         // ascending by version
	first    map[string]map[string]int64 // run -> ns -> version of its first save there
	// expiry of the counters (and so of the whole state): after expLo the
	// state may be gone, after expHi it is; equal unless a replay may or
	// may not have refreshed it. nsExp is the same per namespace.
	expLo, expHi int64
	nsExp        map[string][2]int64
}

func newCk() *mCk {
	return &mCk{counters: map[string]int64{}, ns: map[string][]*mCkpt{}, first: map[string]map[string]int64{},
		nsExp: map[string][2]int64{}}
}

// ending is how a claim ended its node, for replays.
type ending struct {
	op      string // commit, fail, release
	outcome fence.Outcome
	run     string
	retries int // the run's retries when it ended
}

type model struct {
	history    int
	retention  int64 // ms
	now        int64 // ms of key time, moved by advance
	runs       map[string]*mRun
	threads    map[string]*mThread
	ck         map[string]*mCk
	rolledBack map[string]bool
	endings    map[string]ending // claim id -> how it ended its node
	// located: run id -> the thread a submit of it with a thread claimed
	// it for (its locator), also when that submit was refused: a refused
	// run id stays its thread's (a known limit, see the closing note).
	located map[string]string
}

func newModel(history int, retention int64) *model {
	return &model{history: history, retention: retention, runs: map[string]*mRun{}, threads: map[string]*mThread{},
		ck: map[string]*mCk{}, rolledBack: map[string]bool{}, endings: map[string]ending{}, located: map[string]string{}}
}

func (m *model) thread(t string) *mThread {
	th := m.threads[t]
	if th == nil {
		th = &mThread{}
		m.threads[t] = th
	}
	return th
}

// active is the thread's active run: the active-run key, else the
// threadless run of the thread's id.
func (m *model) active(t string) string {
	if th := m.threads[t]; th != nil && th.active != "" {
		return th.active
	}
	if r := m.runs[t]; r != nil && r.threadless {
		return t
	}
	return ""
}

func (m *model) busy(t string) bool {
	if a := m.active(t); a != "" && m.runs[a].status == stRunning {
		return true
	}
	th := m.threads[t]
	return th != nil && len(th.queue) > 0
}

func (m *model) ckState(t string) *mCk {
	c := m.ck[t]
	if c == nil {
		c = newCk()
		m.ck[t] = c
	}
	return c
}

// ---- results ----

// outcome is what an operation answered, reduced to what the contract
// fixes: an error class and a few values.
type outcome struct {
	class string // ok, fenced, busy, conflict, invalid, notfound, rundone, nodebusy, blocked, nodedone, refused, nockpt, skip
	vals  string
}

func (o outcome) String() string {
	if o.vals == "" {
		return o.class
	}
	return o.class + " " + o.vals
}

func ok(format string, args ...any) outcome {
	return outcome{class: "ok", vals: fmt.Sprintf(format, args...)}
}
func fail(class string) outcome { return outcome{class: class} }

// ---- submit ----

func digestOf(thread, strategy string, nodes int) string {
	return fmt.Sprintf("d-%s-%s-%d", thread, strategy, nodes)
}

func (m *model) submit(run, thread, strategy string, nodes int) outcome {
	if thread == "" && strategy != "" {
		return fail("invalid")
	}
	t := thread
	if t == "" {
		t = run
	}
	digest := digestOf(thread, strategy, nodes)
	if owner, found := m.located[run]; found && (thread == "" || owner != t) {
		return fail("conflict")
	}
	if thread != "" && t != run && m.runs[run] == nil {
		m.located[run] = t
	}
	if r := m.runs[run]; r != nil {
		if r.thread == t && r.digest == digest {
			return ok("created=false status=%s", r.status)
		}
		return fail("conflict")
	}
	if thread != "" {
		if r := m.runs[thread]; r != nil && !r.threadless {
			return fail("conflict")
		}
	}
	r := &mRun{id: run, thread: t, threadless: thread == "", strategy: strategy, digest: digest, retryIDs: map[string]bool{}}
	for i := range nodes {
		n := &mNode{id: fmt.Sprintf("n%d", i+1), state: stBlocked, max: 2}
		if i > 0 {
			n.deps = []string{fmt.Sprintf("n%d", i)}
		}
		r.nodes = append(r.nodes, n)
	}
	strat := strategy
	if thread == "" || strat == "" {
		strat = "reject"
	}
	if !m.busy(t) {
		m.runs[run] = r
		m.start(t, r)
		return ok("created=true status=RUNNING behind=")
	}
	a := m.active(t)
	switch strat {
	case "reject":
		return fail("busy")
	case "enqueue":
		m.thread(t).queue = append(m.thread(t).queue, run)
	default: // interrupt, rollback
		th := m.thread(t)
		th.queue = append([]string{run}, th.queue...)
		if a != "" && m.runs[a].status == stRunning {
			m.cancel(a)
			if strat == "rollback" {
				r.target = a
			}
		}
	}
	r.status = stQueued
	m.runs[run] = r
	return ok("created=true status=QUEUED behind=%s", a)
}

// start makes r the thread's active run, RUNNING, its roots READY.
func (m *model) start(t string, r *mRun) {
	r.status = stRunning
	m.thread(t).active = r.id
	for _, n := range r.nodes {
		if len(n.deps) == 0 {
			n.state = stReady
		}
	}
}

// ---- runs and nodes ----

// settle sets the run's status once every node is terminal.
func (m *model) settle(r *mRun) {
	failed := false
	for _, n := range r.nodes {
		if !ended(n.state) {
			return
		}
		failed = failed || n.state == stFailed
	}
	switch {
	case r.cancel:
		r.status = stCancelled
	case failed:
		r.status = stFailed
	default:
		r.status = stSucceeded
	}
}

func (m *model) cancel(run string) outcome {
	r := m.runs[run]
	if r == nil {
		return fail("notfound")
	}
	if r.cancel {
		return ok("already=true")
	}
	if r.status != stRunning && r.status != stQueued {
		return fail("rundone")
	}
	r.cancel = true
	for _, n := range r.nodes {
		if n.state == stBlocked || n.state == stReady {
			n.state = stCancelled
		}
	}
	m.settle(r)
	return ok("already=false")
}

// cancelDescendants ends what waits on a node that FAILED or was CANCELLED.
func (m *model) cancelDescendants(r *mRun, n *mNode) {
	for _, d := range r.nodes {
		if slices.Contains(d.deps, n.id) && (d.state == stBlocked || d.state == stReady) {
			d.state = stCancelled
			m.cancelDescendants(r, d)
		}
	}
}

func (m *model) claim(run, node, worker, claimID string) outcome {
	r := m.runs[run]
	n := r.node(node)
	switch n.state {
	case stRunning:
		if n.claim == claimID {
			return ok("epoch=%d attempt=%d", n.epoch, n.attempt)
		}
		return fail("nodebusy")
	case stBlocked:
		return fail("blocked")
	case stReady:
	default:
		return fail("nodedone")
	}
	n.state, n.epoch, n.attempt, n.claim, n.owner = stRunning, n.epoch+1, n.attempt+1, claimID, worker
	return ok("epoch=%d attempt=%d", n.epoch, n.attempt)
}

// takeover is a claim by another worker after n's lease ran out (plus
// grace), ended with Expire when the claim says so.
func (m *model) takeover(run, node, worker, claimID string) outcome {
	r := m.runs[run]
	n := r.node(node)
	if r.cancel {
		m.endings[n.claim] = ending{op: "expire", outcome: fence.Cancelled, run: run, retries: r.retries}
		n.state = stCancelled
		m.cancelDescendants(r, n)
		m.settle(r)
		return ok("cancelled")
	}
	if n.attempt-n.releases >= n.max {
		m.endings[n.claim] = ending{op: "expire", outcome: fence.Failed, run: run, retries: r.retries}
		n.state = stFailed
		m.cancelDescendants(r, n)
		m.settle(r)
		return ok("failed")
	}
	n.epoch, n.attempt, n.claim, n.owner = n.epoch+1, n.attempt+1, claimID, worker
	return ok("taken epoch=%d attempt=%d", n.epoch, n.attempt)
}

// fenceCheck is the fence of every term-scoped write: "" when l is the
// node's current claim of a RUNNING node.
func (m *model) fenceCheck(l fence.Lease) string {
	n := m.runs[l.Run].node(l.Node)
	if n.epoch != l.Epoch || n.claim != l.ClaimID || n.state != stRunning {
		return "fenced"
	}
	return ""
}

func (m *model) commit(l fence.Lease) outcome {
	if e, found := m.endings[l.ClaimID]; found && e.op == "commit" {
		return ok("replay=true")
	}
	if f := m.fenceCheck(l); f != "" {
		return fail(f)
	}
	r := m.runs[l.Run]
	n := r.node(l.Node)
	n.state = stSucceeded
	m.endings[l.ClaimID] = ending{op: "commit", run: r.id, retries: r.retries}
	if !r.cancel {
		for _, d := range r.nodes {
			if slices.Contains(d.deps, n.id) && d.state == stBlocked {
				d.state = stReady
			}
		}
	}
	m.settle(r)
	return ok("replay=false")
}

func (m *model) failNode(l fence.Lease, final bool) outcome {
	if e, found := m.endings[l.ClaimID]; found && e.op == "fail" {
		return ok("outcome=%s", e.outcome)
	}
	if f := m.fenceCheck(l); f != "" {
		return fail(f)
	}
	r := m.runs[l.Run]
	n := r.node(l.Node)
	var o fence.Outcome
	switch {
	case r.cancel:
		o, n.state = fence.Cancelled, stCancelled
	case !final && n.attempt-n.releases < n.max:
		o, n.state = fence.Retrying, stReady
	default:
		o, n.state = fence.Failed, stFailed
	}
	if o != fence.Retrying {
		m.cancelDescendants(r, n)
		m.settle(r)
	}
	m.endings[l.ClaimID] = ending{op: "fail", outcome: o, run: r.id, retries: r.retries}
	return ok("outcome=%s", o)
}

func (m *model) release(l fence.Lease) outcome {
	if e, found := m.endings[l.ClaimID]; found && e.op == "release" {
		return ok("outcome=%s", e.outcome)
	}
	if f := m.fenceCheck(l); f != "" {
		return fail(f)
	}
	r := m.runs[l.Run]
	n := r.node(l.Node)
	o := fence.Retrying
	if r.cancel {
		o, n.state = fence.Cancelled, stCancelled
		m.settle(r)
	} else {
		n.state = stReady
		n.releases++
	}
	m.endings[l.ClaimID] = ending{op: "release", outcome: o, run: r.id, retries: r.retries}
	return ok("outcome=%s", o)
}

// retry answers "running" for a RUNNING run: the contract's refusal, or
// today's AlreadyRunning; both change nothing.
func (m *model) retry(run, id string) outcome {
	r := m.runs[run]
	if r == nil {
		return fail("notfound")
	}
	if r.retryIDs[id] {
		return ok("replay=true")
	}
	if r.status == stRunning {
		return fail("running")
	}
	if r.status != stFailed && r.status != stCancelled {
		return fail("refused")
	}
	if m.active(r.thread) != run {
		return fail("refused")
	}
	succeeded := map[string]bool{}
	for _, n := range r.nodes {
		succeeded[n.id] = n.state == stSucceeded
	}
	for _, n := range r.nodes {
		if n.state != stFailed && n.state != stCancelled {
			continue
		}
		n.state = stReady
		for _, d := range n.deps {
			if !succeeded[d] {
				n.state = stBlocked
			}
		}
		n.epoch, n.claim, n.owner, n.releases = n.epoch+1, "", "", n.attempt
	}
	r.status, r.cancel = stRunning, false
	r.retryIDs[id] = true
	r.retries++
	return ok("replay=false")
}

// ---- promotion ----

func (m *model) promote(t string) outcome {
	th := m.threads[t]
	if th == nil || len(th.queue) == 0 {
		return ok("started=")
	}
	a := m.active(t)
	if a != "" && m.runs[a].status == stRunning {
		return ok("started=")
	}
	if a != "" && !m.rolledBack[a] {
		for _, q := range th.queue {
			if qr := m.runs[q]; qr.status == stQueued && qr.target == a {
				m.rollBack(t, a)
				break
			}
		}
	}
	for len(th.queue) > 0 {
		head := th.queue[0]
		th.queue = th.queue[1:]
		if hr := m.runs[head]; hr.status == stQueued {
			m.start(t, hr)
			m.markOptional(t)
			return ok("started=%s", head)
		}
	}
	return ok("started=")
}

// rollBack removes everything run a wrote to thread t's checkpoints.
func (m *model) rollBack(t, a string) {
	m.rolledBack[a] = true
	c := m.ck[t]
	if c == nil {
		return
	}
	for ns, list := range c.ns {
		kept := list[:0]
		for _, cp := range list {
			if cp.run == a {
				continue
			}
			for k, w := range cp.writes {
				if w.run == a {
					delete(cp.writes, k)
				}
			}
			kept = append(kept, cp)
		}
		c.ns[ns] = kept
	}
}

// keepSet is what trimming must keep in one namespace: the newest H and
// the active run's anchor.
func (m *model) keepSet(t, ns string) map[*mCkpt]bool {
	c := m.ck[t]
	list := c.ns[ns]
	keep := map[*mCkpt]bool{}
	for i := max(0, len(list)-m.history); i < len(list); i++ {
		keep[list[i]] = true
	}
	a := m.active(t)
	if first, ok := c.first[a][ns]; ok && a != "" {
		for i := len(list) - 1; i >= 0; i-- {
			if list[i].version < first {
				keep[list[i]] = true
				break
			}
		}
	}
	return keep
}

// markOptional marks what no rule keeps any more (after a promotion) as
// trimmable at the implementation's convenience.
func (m *model) markOptional(t string) {
	c := m.ck[t]
	if c == nil {
		return
	}
	for ns, list := range c.ns {
		keep := m.keepSet(t, ns)
		for _, cp := range list {
			cp.optional = !keep[cp]
		}
	}
}

// ---- checkpoints ----

func (m *model) touch(t, ns string) {
	c := m.ckState(t)
	c.expLo, c.expHi = m.now+m.retention, m.now+m.retention
	c.nsExp[ns] = [2]int64{m.now + m.retention, m.now + m.retention}
}

func (m *model) touchMaybe(t, ns string) {
	c := m.ckState(t)
	c.expHi = max(c.expHi, m.now+m.retention)
	e := c.nsExp[ns]
	e[1] = max(e[1], m.now+m.retention)
	c.nsExp[ns] = e
}

func (m *model) findCkpt(t, ns, id string) *mCkpt {
	c := m.ck[t]
	if c == nil {
		return nil
	}
	for _, cp := range c.ns[ns] {
		if cp.id == id {
			return cp
		}
	}
	return nil
}

// saveReplayable says whether a replay of a save has a predictable answer:
// its record is still stored, or its claim is current (a new save).
func (m *model) saveReplayable(l fence.Lease, ns, id string) bool {
	if cp := m.findCkpt(l.Thread, ns, id); cp != nil {
		return cp.claim == l.ClaimID
	}
	return false
}

func (m *model) save(l fence.Lease, ns, id string) outcome {
	t := l.Thread
	if cp := m.findCkpt(t, ns, id); cp != nil && cp.claim == l.ClaimID && cp.run == l.Run && cp.node == l.Node {
		m.touchMaybe(t, ns)
		return ok("version=%d", cp.version)
	}
	if f := m.fenceCheck(l); f != "" {
		return fail(f)
	}
	if m.active(t) != l.Run {
		return fail("fenced")
	}
	c := m.ckState(t)
	c.counters[ns]++
	v := c.counters[ns]
	cp := &mCkpt{version: v, id: id, run: l.Run, node: l.Node, worker: l.Owner, claim: l.ClaimID, epoch: l.Epoch,
		writes: map[string]mWrite{}}
	c.ns[ns] = append(c.ns[ns], cp)
	if c.first[l.Run] == nil {
		c.first[l.Run] = map[string]int64{}
	}
	if _, seen := c.first[l.Run][ns]; !seen {
		c.first[l.Run][ns] = v
	}
	// Trimming keeps the newest H and the anchor; the namespace may hold
	// up to H+1 (an implementation may spare one more when the anchor is
	// among the newest H): the newest others that fit are optional.
	keep := m.keepSet(t, ns)
	spare := m.history + 1 - len(keep)
	list := c.ns[ns]
	var kept []*mCkpt
	for i := len(list) - 1; i >= 0; i-- {
		x := list[i]
		switch {
		case keep[x]:
			x.optional = false
		case spare > 0:
			spare--
			x.optional = true
		default:
			continue
		}
		kept = append([]*mCkpt{x}, kept...)
	}
	c.ns[ns] = kept
	m.touch(t, ns)
	return ok("version=%d", v)
}

type mPut struct {
	idx   int
	value string
}

func wkey(task string, idx int) string { return fmt.Sprintf("%s|%d", task, idx) }

// writesReplay says whether every write of the call is stored as this
// claim stored it.
func (m *model) writesReplay(l fence.Lease, ns, id, task string, puts []mPut) bool {
	cp := m.findCkpt(l.Thread, ns, id)
	if cp == nil {
		return false
	}
	for _, p := range puts {
		w, found := cp.writes[wkey(task, p.idx)]
		if !found || w.claim != l.ClaimID || w.value != p.value {
			return false
		}
	}
	return true
}

func (m *model) putWrites(l fence.Lease, ns, id, task string, puts []mPut) outcome {
	t := l.Thread
	if m.writesReplay(l, ns, id, task, puts) {
		m.touchMaybe(t, ns)
		return ok("")
	}
	if f := m.fenceCheck(l); f != "" {
		return fail(f)
	}
	if m.active(t) != l.Run {
		return fail("fenced")
	}
	cp := m.findCkpt(t, ns, id)
	if cp == nil {
		return fail("nockpt")
	}
	for _, p := range puts {
		k := wkey(task, p.idx)
		if _, found := cp.writes[k]; found && p.idx >= 0 {
			continue
		}
		cp.writes[k] = mWrite{value: p.value, run: l.Run, claim: l.ClaimID}
	}
	m.touch(t, ns)
	return ok("")
}

func (m *model) deleteCheckpoints(t string) outcome {
	if a := m.active(t); a != "" && m.runs[a].status == stRunning {
		return fail("busy")
	}
	if c := m.ck[t]; c != nil {
		for ns := range c.ns {
			c.ns[ns] = nil
		}
	}
	return ok("")
}

// advance moves key time by d; false when a thread's expiry is not
// predictable across it (the caller then does not advance).
func (m *model) advance(d int64) bool {
	to := m.now + d
	for _, c := range m.ck {
		if c.expHi != 0 && to >= c.expLo && to < c.expHi {
			return false
		}
		for _, e := range c.nsExp {
			if to >= e[0] && to < e[1] {
				return false
			}
		}
	}
	m.now = to
	for t, c := range m.ck {
		if c.expHi != 0 && to >= c.expHi {
			delete(m.ck, t)
			continue
		}
		for ns, e := range c.nsExp {
			if to >= e[1] {
				delete(c.nsExp, ns)
				delete(c.ns, ns)
				for _, f := range c.first {
					delete(f, ns)
				}
			}
		}
	}
	return true
}

// ---- views ----

func (m *model) threadExists(t string) bool {
	if m.active(t) != "" {
		return true
	}
	if th := m.threads[t]; th != nil && len(th.queue) > 0 {
		return true
	}
	return len(m.nsVersions(t)) > 0
}

func (m *model) nsVersions(t string) map[string]int64 {
	out := map[string]int64{}
	if c := m.ck[t]; c != nil {
		for ns, list := range c.ns {
			if len(list) > 0 {
				out[ns] = list[len(list)-1].version
			}
		}
	}
	return out
}

func ckptString(cp *mCkpt) string {
	return fmt.Sprintf("v%d:%s by %s/%s@%d(%s)", cp.version, cp.id, cp.run, cp.node, cp.epoch, cp.worker)
}

func writesString(ws map[string]mWrite) string {
	var out []string
	for k, w := range ws {
		out = append(out, k+"="+w.value)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func mapString(m map[string]int64) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%q:%d", k, v))
	}
	sort.Strings(out)
	return "{" + strings.Join(out, " ") + "}"
}
