package fence_test

// TestThreadModel drives a fence.Store with random sequences of thread
// operations (pgregory.net/rapid) and compares, after every step, the
// threads, the runs, every namespace's checkpoints and their pending writes
// with the reference model in threadmodel_model_test.go, on miniredis and
// on a real redis-server (the comparison: threadmodel_check_test.go; resent
// calls: threadmodel_replay_test.go).
//
//	go test -race -run ThreadModel ./fence/                       # the fixed budget
//	go test -race -run ThreadModel ./fence/ -rapid.checks=2000    # longer
//	BATON_THREADMODEL_CHECKS=2000 go test -run ThreadModel ./fence/
//	go test -run ThreadModel ./fence/ -rapid.seed=N               # replay a failure
//
// A failure prints the shrunk sequence, one numbered step a line with the
// store's answer under it, and what differed; in a checkpoint list "?"
// marks one the contract lets the store trim or keep.
//
// BATON_THREADMODEL_OFF (comma-separated) leaves things out, to look past a
// known defect: actions (submit, claim, save, putWrites, end, cancel,
// takeover, promote, retry, delete, advance, replay, promoteDuring),
// strategies (reject, enqueue, interrupt, rollback), and: badinput (a
// strategy on a run without a thread), threadless (run "t1", the id of a
// thread), resubmit (a run id twice), replayend (resent commits, fails,
// releases), crossend (another end of an ended claim), cancelqueued,
// promotebusy (promotions while the active run runs), twons (a second
// namespace), trim (a history of 50, not 2-3), rollbackidle (a rollback
// submitted while the active run is not RUNNING: it has no target),
// rollbackqueue (a rollback submitted while runs are queued).
// BATON_THREADMODEL_CLIENTCANCEL=1 makes the test cancel the active run
// after a queued interrupt or rollback submit, as runner.Client did before
// the strategies became one script.
//
// Readings of the contract (/work/threads-spec.md) where it leaves room:
// a namespace's checkpoint state expires together, the retention after its
// last write, and the thread's counters the retention after the last write
// to any namespace (so they outlive what they number); a run cancelled while QUEUED keeps the thread
// busy until it leaves the queue, which the store may do at cancel or at
// promotion (both accepted); trimming keeps the newest H and the anchor,
// and may keep up to H+1; a replayed save, write, fail or release answers
// as the first time also after a takeover, a later claim's end or the
// run's end (replays whose record was trimmed or rolled back, or that
// follow a retry of the run, are not generated); a retry of a RUNNING run
// may be refused or answered AlreadyRunning; a replay does not promise to
// push the retention back (an advance over such a window is skipped).
//
// Time: leases are long (10 min) and never run out by themselves; a
// takeover shortens the owner's lease with a 1 ms heartbeat and waits for
// Redis's TIME to pass it. Retention is 1 h, and "time passes" for keys
// only: miniredis FastForwards, a real server has every key's time to
// live lowered (or the key deleted) as if the time had passed.

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

const (
	tmLease     = 10 * time.Minute
	tmRetention = time.Hour
	tmAdvance   = 36 * time.Minute // 0.6 of the retention: two of them outlive it
)

var (
	tmRunIDs  = []string{"r1", "r2", "r3", "r4", "r5", "r6", "t1"} // "t1" is threadless only: the id of a thread
	tmThreads = []string{"t1", "t2"}
	tmViews   = []string{"t1", "t2", "r1", "r2", "r3", "r4", "r5", "r6"}
	tmNS      = []string{"", "sub"}
	tmWorkers = []string{"w1", "w2", "w3"}
)

func TestThreadModel(t *testing.T) {
	setRapidDefault("rapid.checks", cmp.Or(os.Getenv("BATON_THREADMODEL_CHECKS"), "100"), "RAPID_CHECKS")
	setRapidDefault("rapid.steps", "50", "RAPID_STEPS")
	setRapidDefault("rapid.nofailfile", "true", "RAPID_NOFAILFILE")
	off := map[string]bool{}
	for _, f := range strings.Split(os.Getenv("BATON_THREADMODEL_OFF"), ",") {
		if f = strings.TrimSpace(f); f != "" {
			off[f] = true
		}
	}
	clientCancel := os.Getenv("BATON_THREADMODEL_CLIENTCANCEL") == "1"
	promoteSHA := ""
	for sha, name := range redistest.ScriptNames(t) {
		if name == "promote" {
			promoteSHA = sha
		}
	}
	for _, be := range redistest.Backends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			hook := &promoteHook{sha: promoteSHA}
			be.Client.AddHook(hook)
			rapid.Check(t, func(rt *rapid.T) {
				h := newHarness(t, rt, be, hook, off, clientCancel)
				rt.Repeat(h.actions())
			})
		})
	}
}

// setRapidDefault sets a rapid flag unless the command line or its
// environment variable did.
func setRapidDefault(name, value, env string) {
	if os.Getenv(env) != "" {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set {
		_ = flag.Set(name, value)
	}
}

// promoteHook runs fire (once) just before the next promote script is sent:
// a step of another process that lands inside Promote, between whatever
// calls it makes before its script and the script.
type promoteHook struct {
	sha  string
	fire func()
}

func (p *promoteHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *promoteHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (p *promoteHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f := p.fire; f != nil && cmd.Name() == "evalsha" && len(cmd.Args()) > 1 && cmd.Args()[1] == p.sha {
			p.fire = nil
			f()
		}
		return next(ctx, cmd)
	}
}

type harness struct {
	ctx          context.Context
	t            *testing.T
	rt           *rapid.T
	be           redistest.Backend
	store        *fence.Store
	m            *model
	hook         *promoteHook
	off          map[string]bool
	clientCancel bool

	step     int
	seq      int
	leases   []fence.Lease
	byClaim  map[string]fence.Lease
	past     []pastOp
	ids      map[string]map[string][]string // thread -> ns -> checkpoint ids used
	retryIDs map[string][]string
	tried    map[string]bool // run ids submitted
}

func newHarness(t *testing.T, rt *rapid.T, be redistest.Backend, hook *promoteHook, off map[string]bool, clientCancel bool) *harness {
	ctx := t.Context()
	if err := be.Client.FlushAll(ctx).Err(); err != nil {
		rt.Fatalf("flushall: %v", err)
	}
	history := rapid.IntRange(2, 3).Draw(rt, "history")
	if off["trim"] {
		history = 50
	}
	store := fence.New(be.Client, &fence.Options{CheckpointHistory: history, ThreadRetention: tmRetention})
	rt.Logf("store: CheckpointHistory=%d ThreadRetention=%s; leases %s; two-node runs are n1 -> n2, max 2 attempts",
		history, tmRetention, tmLease)
	return &harness{ctx: ctx, t: t, rt: rt, be: be, store: store, m: newModel(history, tmRetention.Milliseconds()),
		hook: hook, off: off, clientCancel: clientCancel, byClaim: map[string]fence.Lease{},
		ids: map[string]map[string][]string{}, retryIDs: map[string][]string{}, tried: map[string]bool{}}
}

func (h *harness) actions() map[string]func(*rapid.T) {
	all := map[string]func(*rapid.T){
		"":              h.check,
		"submit":        h.submit,
		"submit2":       h.submit,
		"claim":         h.claim,
		"claim2":        h.claim,
		"save":          h.save,
		"save2":         h.save,
		"putWrites":     h.putWrites,
		"end":           h.end,
		"end2":          h.end,
		"cancel":        h.cancel,
		"takeover":      h.takeover,
		"promote":       h.promote,
		"promote2":      h.promote,
		"retry":         h.retry,
		"delete":        h.deleteCheckpoints,
		"advance":       h.advance,
		"replay":        h.replay,
		"replay2":       h.replay,
		"promoteDuring": h.promoteDuring,
	}
	for name := range all {
		if name != "" && h.off[strings.TrimSuffix(name, "2")] {
			delete(all, name)
		}
	}
	return all
}

// namespaces are the checkpoint namespaces steps write to.
func (h *harness) namespaces() []string {
	if h.off["twons"] {
		return tmNS[:1]
	}
	return tmNS
}

func (h *harness) logf(format string, args ...any) {
	h.step++
	h.rt.Logf("#%d "+format, append([]any{h.step}, args...)...)
}

// expect fails the test when the store's answer is not the model's.
func (h *harness) expect(what string, got, want outcome) {
	h.rt.Helper()
	if got.class == want.class && got.vals == want.vals {
		h.rt.Logf("     -> %s", got)
		return
	}
	h.rt.Fatalf("#%d %s: the store answered %q, the contract says %q", h.step, what, got, want)
}

func classify(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, fence.ErrNotActiveRun), errors.Is(err, fence.ErrStaleEpoch), errors.Is(err, fence.ErrNotOwner),
		errors.Is(err, fence.ErrNotRunning):
		return "fenced"
	case errors.Is(err, fence.ErrThreadBusy):
		return "busy"
	case errors.Is(err, fence.ErrRunConflict):
		return "conflict"
	case errors.Is(err, fence.ErrInvalidData):
		return "invalid"
	case errors.Is(err, fence.ErrNotFound):
		return "notfound"
	case errors.Is(err, fence.ErrRunDone):
		return "rundone"
	case errors.Is(err, fence.ErrNodeBusy):
		return "nodebusy"
	case errors.Is(err, fence.ErrNodeBlocked):
		return "blocked"
	case errors.Is(err, fence.ErrNodeDone):
		return "nodedone"
	case errors.Is(err, fence.ErrNotRetryable):
		return "refused"
	case errors.Is(err, fence.ErrNoCheckpoint):
		return "nockpt"
	}
	return "error(" + err.Error() + ")"
}

func (h *harness) fresh(prefix string) string {
	h.seq++
	return prefix + strconv.Itoa(h.seq)
}

// ---- run specs ----

func tmSpec(run, thread, strategy string, nodes int) fence.SubmitArgs {
	defs := []nodeDef{node("n1").attempts(2)}
	if nodes == 2 {
		defs = append(defs, node("n2", "n1").attempts(2))
	}
	a := spec(run, defs...)
	a.Thread, a.Multitask, a.Digest = thread, strategy, digestOf(thread, strategy, nodes)
	return a
}

// dependents and descendants of a node of a run as the model holds it.
func (h *harness) dependents(run, node string) []string {
	var out []string
	for _, n := range h.m.runs[run].nodes {
		if slices.Contains(n.deps, node) {
			out = append(out, n.id)
			out = append(out, h.dependents(run, n.id)...)
		}
	}
	return out
}

// ---- actions ----

func (h *harness) submit(rt *rapid.T) {
	runs := tmRunIDs
	if h.off["threadless"] {
		runs = runs[:len(runs)-1]
	}
	if h.off["resubmit"] {
		runs = slices.DeleteFunc(slices.Clone(runs), func(r string) bool { return h.tried[r] })
		if len(runs) == 0 {
			rt.Skip("every run id tried")
		}
	}
	run := rapid.SampledFrom(runs).Draw(rt, "run")
	h.tried[run] = true
	thread := ""
	if run != "t1" {
		thread = rapid.SampledFrom([]string{"", "t1", "t2", "t1", "t2"}).Draw(rt, "thread")
	}
	strategies := []string{"", "reject", "enqueue", "interrupt", "rollback"}
	if thread == "" {
		strategies = []string{"", "", "", "interrupt"}
		if h.off["badinput"] {
			strategies = []string{""}
		}
	}
	strategies = slices.DeleteFunc(strategies, func(s string) bool { return h.off[s] })
	strategy := rapid.SampledFrom(strategies).Draw(rt, "strategy")
	if a := h.m.active(thread); strategy == "rollback" && h.off["rollbackidle"] && (a == "" || h.m.runs[a].status != stRunning) {
		rt.Skip("a rollback with no target")
	}
	if th := h.m.threads[thread]; strategy == "rollback" && h.off["rollbackqueue"] && th != nil && len(th.queue) > 0 {
		rt.Skip("a rollback behind queued runs")
	}
	nodes := rapid.IntRange(1, 2).Draw(rt, "nodes")
	h.logf("submit %s thread=%q multitask=%q nodes=%d", run, thread, strategy, nodes)
	want := h.m.submit(run, thread, strategy, nodes)
	res, err := h.store.Submit(h.ctx, tmSpec(run, thread, strategy, nodes))
	got := fail(classify(err))
	if err == nil {
		got = ok("created=%v status=%s behind=%s", res.Created, res.Status, res.Behind)
		if !res.Created {
			got = ok("created=false status=%s", res.Status)
		}
	}
	h.expect("submit", got, want)
	if h.clientCancel && err == nil && res.Created && res.Status == stQueued && res.Behind != "" &&
		(strategy == "interrupt" || strategy == "rollback") {
		_, cerr := h.store.Cancel(h.ctx, res.Behind, "interrupted by run "+run, "client")
		rt.Logf("     client cancels %s: %s", res.Behind, classify(cerr))
		h.m.cancel(res.Behind)
	}
}

func (h *harness) allNodes(keep func(*mRun, *mNode) bool) [][2]string {
	var out [][2]string
	ids := make([]string, 0, len(h.m.runs))
	for id := range h.m.runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := h.m.runs[id]
		for _, n := range r.nodes {
			if keep(r, n) {
				out = append(out, [2]string{id, n.id})
			}
		}
	}
	return out
}

func (h *harness) ref(run, node string) fence.NodeRef {
	return fence.NodeRef{Thread: h.m.runs[run].thread, Run: run, Node: node}
}

func (h *harness) claim(rt *rapid.T) {
	readyOnly := rapid.IntRange(0, 4).Draw(rt, "readyOnly") > 0
	cands := h.allNodes(func(_ *mRun, n *mNode) bool { return !readyOnly || n.state == stReady })
	if len(cands) == 0 {
		rt.Skip("no node")
	}
	c := rapid.SampledFrom(cands).Draw(rt, "node")
	worker := rapid.SampledFrom(tmWorkers).Draw(rt, "worker")
	claimID := h.fresh("k")
	h.logf("claim %s/%s by %s (claim %s)", c[0], c[1], worker, claimID)
	want := h.m.claim(c[0], c[1], worker, claimID)
	got := h.doClaim(c[0], c[1], worker, claimID, "claim")
	h.expect("claim", got, want)
}

func (h *harness) doClaim(run, node, worker, claimID, kind string) outcome {
	cl, err := h.store.ClaimAs(h.ctx, h.ref(run, node), worker, claimID, tmLease, 0)
	if err != nil {
		return fail(classify(err))
	}
	if _, seen := h.byClaim[claimID]; !seen {
		h.leases = append(h.leases, cl.Lease)
		h.byClaim[claimID] = cl.Lease
		h.past = append(h.past, pastOp{kind: "claim", lease: cl.Lease})
	}
	return ok("epoch=%d attempt=%d", cl.Epoch, cl.Attempt)
}

// pickLease draws a lease: mostly a node's current claim, else any ever
// granted (a stale owner).
func (h *harness) pickLease(rt *rapid.T) (fence.Lease, bool) {
	if len(h.leases) == 0 {
		return fence.Lease{}, false
	}
	var current []fence.Lease
	for _, l := range h.leases {
		if n := h.m.runs[l.Run].node(l.Node); n.state == stRunning && n.claim == l.ClaimID {
			current = append(current, l)
		}
	}
	if len(current) > 0 && rapid.IntRange(0, 3).Draw(rt, "current") > 0 {
		return current[rapid.IntRange(0, len(current)-1).Draw(rt, "lease")], true
	}
	return h.leases[rapid.IntRange(0, len(h.leases)-1).Draw(rt, "lease")], true
}

func leaseString(l fence.Lease) string {
	return fmt.Sprintf("%s/%s@%d by %s (claim %s)", l.Run, l.Node, l.Epoch, l.Owner, l.ClaimID)
}

func (h *harness) save(rt *rapid.T) {
	l, found := h.pickLease(rt)
	if !found {
		rt.Skip("no lease")
	}
	ns := rapid.SampledFrom(h.namespaces()).Draw(rt, "ns")
	id := h.fresh("c")
	h.logf("save %s ns=%q id=%s by %s", l.Thread, ns, id, leaseString(l))
	h.doSave(l, ns, id)
}

func (h *harness) doSave(l fence.Lease, ns, id string) {
	want := h.m.save(l, ns, id)
	cp, err := h.store.SaveCheckpoint(h.ctx, l, fence.CheckpointWrite{NS: ns, ID: id, Data: []byte(`{"s":"` + id + `"}`)})
	got := fail(classify(err))
	if err == nil {
		got = ok("version=%d", cp.Version)
		h.past = append(h.past, pastOp{kind: "save", lease: l, ns: ns, id: id})
	}
	if h.ids[l.Thread] == nil {
		h.ids[l.Thread] = map[string][]string{}
	}
	if !slices.Contains(h.ids[l.Thread][ns], id) {
		h.ids[l.Thread][ns] = append(h.ids[l.Thread][ns], id)
	}
	h.expect("save", got, want)
}

func (h *harness) putWrites(rt *rapid.T) {
	l, found := h.pickLease(rt)
	if !found {
		rt.Skip("no lease")
	}
	ns := rapid.SampledFrom(h.namespaces()).Draw(rt, "ns")
	c := h.m.ck[l.Thread]
	if c == nil || len(c.ns[ns]) == 0 {
		rt.Skip("no checkpoint")
	}
	cp := rapid.SampledFrom(c.ns[ns]).Draw(rt, "checkpoint")
	task := rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "task")
	idxs := rapid.SliceOfNDistinct(rapid.SampledFrom([]int{0, 1, -1}), 1, 2, rapid.ID[int]).Draw(rt, "idx")
	var puts []mPut
	for _, i := range idxs {
		puts = append(puts, mPut{idx: i, value: strconv.Quote(h.fresh("v"))})
	}
	h.logf("putWrites %s ns=%q on %s task=%s %v by %s", l.Thread, ns, cp.id, task, puts, leaseString(l))
	h.doPutWrites(l, ns, cp.id, task, puts)
}

func (h *harness) doPutWrites(l fence.Lease, ns, id, task string, puts []mPut) {
	want := h.m.putWrites(l, ns, id, task, puts)
	ws := make([]fence.PendingWrite, len(puts))
	for i, p := range puts {
		ws[i] = fence.PendingWrite{Idx: p.idx, Channel: "ch", Value: []byte(p.value)}
	}
	_, err := h.store.PutWrites(h.ctx, l, ns, id, task, ws)
	got := fail(classify(err))
	if err == nil {
		got = ok("")
		h.past = append(h.past, pastOp{kind: "writes", lease: l, ns: ns, id: id, task: task, puts: puts})
	}
	h.expect("putWrites", got, want)
}

func (h *harness) end(rt *rapid.T) {
	l, found := h.pickLease(rt)
	if !found {
		rt.Skip("no lease")
	}
	kind := rapid.SampledFrom([]string{"commit", "commit", "fail", "fail-final", "release"}).Draw(rt, "end")
	resend := ""
	if e, found := h.m.endings[l.ClaimID]; found {
		switch {
		case e.op == strings.TrimSuffix(kind, "-final"):
			if h.off["replay"] || h.off["replayend"] {
				rt.Skip("a resend")
			}
			resend = " again (a resend: its reply was lost)"
		case h.off["crossend"]:
			rt.Skip("another end of an ended claim")
		}
	}
	h.logf("%s %s%s", kind, leaseString(l), resend)
	h.doEnd(l, kind)
}

func (h *harness) doEnd(l fence.Lease, kind string) {
	deps := h.dependents(l.Run, l.Node)
	var want, got outcome
	var err error
	switch kind {
	case "commit":
		want = h.m.commit(l)
		var c fence.Committed
		c, err = h.store.Commit(h.ctx, l, []byte(`"ok"`), deps)
		got = ok("replay=%v", c.Replay)
	case "fail", "fail-final":
		want = h.m.failNode(l, kind == "fail-final")
		var e fence.Ended
		e, err = h.store.Fail(h.ctx, l, fence.Failure{Err: "boom", Final: kind == "fail-final"}, deps)
		got = ok("outcome=%s", e.Outcome)
	case "release":
		want = h.m.release(l)
		var e fence.Ended
		e, err = h.store.Release(h.ctx, l, "shutdown")
		got = ok("outcome=%s", e.Outcome)
	}
	if err != nil {
		got = fail(classify(err))
	} else {
		op := strings.TrimSuffix(kind, "-final")
		h.past = append(h.past, pastOp{kind: op, lease: l, final: kind == "fail-final"})
	}
	h.expect(kind, got, want)
}

func (h *harness) runIDs() []string {
	ids := make([]string, 0, len(h.m.runs))
	for id := range h.m.runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (h *harness) cancel(rt *rapid.T) {
	if len(h.m.runs) == 0 {
		rt.Skip("no run")
	}
	run := rapid.SampledFrom(h.runIDs()).Draw(rt, "run")
	if h.off["cancelqueued"] && h.m.runs[run].status == stQueued {
		rt.Skip("queued")
	}
	h.logf("cancel %s", run)
	want := h.m.cancel(run)
	res, err := h.store.Cancel(h.ctx, run, "user", "client")
	got := fail(classify(err))
	if err == nil {
		got = ok("already=%v", res.Already)
	}
	h.expect("cancel", got, want)
}

func (h *harness) takeover(rt *rapid.T) {
	cands := h.allNodes(func(_ *mRun, n *mNode) bool { return n.state == stRunning })
	if len(cands) == 0 {
		rt.Skip("no running node")
	}
	c := rapid.SampledFrom(cands).Draw(rt, "node")
	worker := rapid.SampledFrom(tmWorkers).Draw(rt, "worker")
	old := h.byClaim[h.m.runs[c[0]].node(c[1]).claim]
	claimID := h.fresh("k")
	h.logf("lease of %s runs out; %s claims it (claim %s)", leaseString(old), worker, claimID)
	// The owner's lease made to run out now, on Redis's clock.
	hb, err := h.store.Heartbeat(h.ctx, old, time.Millisecond, -1)
	if err != nil {
		rt.Fatalf("#%d heartbeat of the current owner %s: %v", h.step, leaseString(old), err)
	}
	for {
		h.be.Advance(h.t, 2*time.Millisecond)
		now, err := h.be.Client.Time(h.ctx).Result()
		if err != nil {
			rt.Fatalf("TIME: %v", err)
		}
		if now.After(hb.Until) {
			break
		}
	}
	want := h.m.takeover(c[0], c[1], worker, claimID)
	cl, err := h.store.ClaimAs(h.ctx, h.ref(c[0], c[1]), worker, claimID, tmLease, 0)
	var got outcome
	var exp *fence.ExpiredError
	switch {
	case errors.As(err, &exp):
		e, xerr := h.store.Expire(h.ctx, exp, worker, 0)
		got = fail("expire: " + classify(xerr))
		if xerr == nil {
			got = ok("%s", e.Outcome)
		}
	case err != nil:
		got = fail(classify(err))
	default:
		got = ok("taken epoch=%d attempt=%d", cl.Epoch, cl.Attempt)
		h.leases = append(h.leases, cl.Lease)
		h.byClaim[claimID] = cl.Lease
	}
	h.expect("takeover", got, want)
}

func (h *harness) promote(rt *rapid.T) {
	t := rapid.SampledFrom(tmThreads).Draw(rt, "thread")
	if a := h.m.active(t); h.off["promotebusy"] && a != "" && h.m.runs[a].status == stRunning {
		rt.Skip("its active run is running")
	}
	who := rapid.SampledFrom([]string{"w1", "client", "sweeper"}).Draw(rt, "who")
	h.logf("promote %s by %s", t, who)
	want := h.m.promote(t)
	p, err := h.store.Promote(h.ctx, t, who)
	h.expect("promote", promoted(p, err), want)
}

func promoted(p *fence.Promoted, err error) outcome {
	if err != nil {
		return fail(classify(err))
	}
	if p == nil {
		return ok("started=")
	}
	return ok("started=%s", p.Run)
}

// promoteDuring is a promotion during which the owner of a node of the
// thread's active run saves a checkpoint and ends its node (the moment a
// run answering a cancel saves its state): whatever Promote does before its
// script, the two must be ordered as a whole.
func (h *harness) promoteDuring(rt *rapid.T) {
	t := rapid.SampledFrom(tmThreads).Draw(rt, "thread")
	a := h.m.active(t)
	th := h.m.threads[t]
	if a == "" || th == nil || len(th.queue) == 0 {
		rt.Skip("nothing queued")
	}
	var owners []fence.Lease
	for _, n := range h.m.runs[a].nodes {
		if n.state == stRunning {
			owners = append(owners, h.byClaim[n.claim])
		}
	}
	if len(owners) == 0 {
		rt.Skip("no owner")
	}
	l := rapid.SampledFrom(owners).Draw(rt, "owner")
	ns := rapid.SampledFrom(h.namespaces()).Draw(rt, "ns")
	kind := rapid.SampledFrom([]string{"commit", "fail-final", "release"}).Draw(rt, "end")
	id := h.fresh("c")
	h.logf("promote %s; while it runs, %s saves %s ns=%q and %ss", t, leaseString(l), id, ns, kind)
	fired := false
	h.hook.fire = func() {
		fired = true
		h.rt.Logf("     (inside Promote, before its script)")
		h.doSave(l, ns, id)
		h.doEnd(l, kind)
	}
	p, err := h.store.Promote(h.ctx, t, "sweeper")
	h.hook.fire = nil
	got := promoted(p, err)
	if fired {
		h.expect("promote", got, h.m.promote(t))
		return
	}
	h.expect("promote", got, h.m.promote(t))
	h.rt.Logf("     (after Promote: its script was not seen)")
	h.doSave(l, ns, id)
	h.doEnd(l, kind)
}

func (h *harness) retry(rt *rapid.T) {
	if len(h.m.runs) == 0 {
		rt.Skip("no run")
	}
	run := rapid.SampledFrom(h.runIDs()).Draw(rt, "run")
	id := ""
	if old := h.retryIDs[run]; len(old) > 0 && rapid.Bool().Draw(rt, "resend") {
		id = rapid.SampledFrom(old).Draw(rt, "retryID")
	} else {
		id = h.fresh("q")
		h.retryIDs[run] = append(h.retryIDs[run], id)
	}
	h.logf("retry %s (request %s)", run, id)
	want := h.m.retry(run, id)
	res, err := h.store.Retry(h.ctx, run, id, "client")
	got := fail(classify(err))
	switch {
	case errors.Is(err, fence.ErrNotActiveRun) || errors.Is(err, fence.ErrNotRetryable):
		got = fail("refused")
		if want.class == "running" {
			got = want
		}
	case err == nil && res.AlreadyRunning:
		got = fail("running")
	case err == nil:
		got = ok("replay=%v", res.Replay)
	}
	h.expect("retry", got, want)
}

func (h *harness) deleteCheckpoints(rt *rapid.T) {
	t := rapid.SampledFrom(tmViews).Draw(rt, "thread")
	h.logf("delete checkpoints of %s", t)
	want := h.m.deleteCheckpoints(t)
	_, err := h.store.DeleteCheckpoints(h.ctx, t)
	got := fail(classify(err))
	if err == nil {
		got = ok("")
	}
	h.expect("delete checkpoints", got, want)
}

func (h *harness) advance(rt *rapid.T) {
	if !h.m.advance(tmAdvance.Milliseconds()) {
		rt.Skip("an expiry is not predictable")
	}
	h.logf("%s pass (key time; retention %s)", tmAdvance, tmRetention)
	if h.be.Mini != nil {
		h.be.Mini.FastForward(tmAdvance)
		return
	}
	// A real server: every key's time to live as if the time had passed.
	var cursor uint64
	for {
		keys, next, err := h.be.Client.Scan(h.ctx, cursor, "*", 1000).Result()
		if err != nil {
			rt.Fatalf("scan: %v", err)
		}
		for _, k := range keys {
			ttl, err := h.be.Client.PTTL(h.ctx, k).Result()
			if err != nil {
				rt.Fatalf("pttl %s: %v", k, err)
			}
			switch {
			case ttl <= 0: // none, or gone
			case ttl <= tmAdvance:
				h.be.Client.Del(h.ctx, k)
			default:
				h.be.Client.PExpire(h.ctx, k, ttl-tmAdvance)
			}
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}
