package fence_test

// TestLimitModel drives a fence.Store with random sequences of operations
// on nodes under concurrency limits (pgregory.net/rapid), keeps a model of
// the nodes and their claims, and checks after every step, on miniredis,
// a real redis-server and a 3-master Redis Cluster (where a limit's keys
// live in another slot than its nodes', limitcluster.go), what flow
// control promises
// (docs/flow-control.md):
//
//   - never more claims hold slots of a key than its concurrency, counting
//     from each change on: after a lowered limit the count only falls
//     until it is under the new limit;
//   - every ended claim's slot is free, and every running claim holds one
//     slot of each limit its node names;
//   - no slot stays free while a node waits for it: a free slot is handed
//     to the first waiter (and the waiter woken) in the step that freed
//     it, so a waiter is woken at the latest by the next sweep;
//   - the store answers as the model says: a terminal node is done, a
//     live lease is busy, a stale lease's end or heartbeat is fenced, a
//     current one's is accepted, a claim waits only when a slot is full
//     or others are ahead of it.
//
// Operations: set (raise, lower) a limit; submit a one-node run naming one
// or two limits; claim (with lost replies, resent under the claim id);
// heartbeat; pause an owner past its lease and take the node over (or
// expire it, out of attempts); commit, fail, release (with lost replies);
// cancel; pack ended runs (the retention). Waits (park, resume) are left
// out: another model covers them.
//
//	go test -run LimitModel ./fence/                       # 100 checks
//	BATON_LIMITMODEL_CHECKS=1000 go test -run LimitModel ./fence/
//	go test -run LimitModel ./fence/ -rapid.seed=N         # replay a failure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

var (
	lmRuns   = []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	lmKeys   = []string{"j", "k"}
	lmLimits = []string{"k=1", "j=1", "k=1,j=1", "j=1,k=1"}
)

const (
	lmLease    = 10 * time.Minute
	lmGrace    = time.Millisecond
	lmAttempts = 2
)

func TestLimitModel(t *testing.T) {
	setRapidDefault("rapid.checks", cmp.Or(os.Getenv("BATON_LIMITMODEL_CHECKS"), "100"), "RAPID_CHECKS")
	setRapidDefault("rapid.steps", "40", "RAPID_STEPS")
	setRapidDefault("rapid.nofailfile", "true", "RAPID_NOFAILFILE")
	for _, be := range modelBackends(t) {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			tb := &testBundle{be: be, store: fence.New(be.Client, nil), ctx: t.Context()}
			dropper, lossy := tb.lossyStore(t)
			checks := 0
			rapid.Check(t, func(rt *rapid.T) {
				checks++
				h := newLimitHarness(t, rt, tb, dropper, lossy)
				rt.Repeat(h.actions())
			})
			t.Logf("%s: %d checks passed", be.Name, checks)
		})
	}
}

// lmRun is one run of the model: one node "a".
type lmRun struct {
	limits    string
	keys      []string
	state     string // READY, RUNNING, SUCCEEDED, FAILED, CANCELLED
	counted   int    // attempts that count against lmAttempts
	lease     fence.Lease
	expired   bool            // its owner was paused past the lease (not taken over yet)
	slots     map[string]bool // keys whose slot the current claim holds (none taken while a key had no concurrency)
	runWait   bool            // a takeover of it, running without a slot, was told to wait: it may stay queued
	cancelled bool
}

type limitHarness struct {
	t       *testing.T
	rt      *rapid.T
	tb      *testBundle
	dropper *replyDropper
	lossy   *fence.Store
	wl      *wakeLog

	step   int
	seq    int
	conc   map[string]int
	runs   map[string]*lmRun
	stale  []fence.Lease     // leases whose claim ended or was taken over
	endBy  map[string]string // claim id -> the script that ended it ("" when taken over or expired)
	woken  map[string]bool   // runs handed a slot since their last successful claim
	claims map[string]int    // key -> claims holding a slot after the last step
}

func newLimitHarness(t *testing.T, rt *rapid.T, tb *testBundle, d *replyDropper, lossy *fence.Store) *limitHarness {
	if err := flushAll(tb.ctx, tb.be.Client); err != nil {
		rt.Fatalf("flushall: %v", err)
	}
	h := &limitHarness{t: t, rt: rt, tb: tb, dropper: d, lossy: lossy, wl: &wakeLog{},
		conc: map[string]int{}, endBy: map[string]string{}, runs: map[string]*lmRun{}, woken: map[string]bool{}, claims: map[string]int{}}
	tb.store.SetWake(h.wl.fn)
	lossy.SetWake(h.wl.fn)
	d.mu.Lock()
	clear(d.drop)
	clear(d.skip)
	d.mu.Unlock()
	for _, k := range lmKeys {
		h.conc[k] = rapid.IntRange(1, 3).Draw(rt, "conc_"+k)
		if err := tb.store.SetLimit(tb.ctx, fence.Limit{Name: k, Concurrency: h.conc[k]}); err != nil {
			rt.Fatalf("set limit: %v", err)
		}
	}
	return h
}

func (h *limitHarness) actions() map[string]func(*rapid.T) {
	all := map[string]func(*rapid.T){
		"":          h.check,
		"setLimit":  h.setLimit,
		"delete":    h.deleteLimit,
		"submit":    h.submit,
		"claim":     h.claim,
		"claim2":    h.claim,
		"heartbeat": h.heartbeat,
		"pause":     h.pause,
		"end":       h.end,
		"end2":      h.end,
		"cancel":    h.cancel,
		"pack":      h.pack,
	}
	if h.tb.be.Name == "cluster" {
		// On a cluster each slot's holder has a deadline of its own
		// (limitcluster.go): an owner paused past it loses the slot, and
		// its takeover takes a slot anew, behind the waiters. The model
		// keeps a paused owner's slot, as one server does; takeovers on a
		// cluster are checked by TestLimitOnCluster and
		// TestLimitChangesOnCluster instead.
		delete(all, "pause")
	}
	return all
}

func (h *limitHarness) logf(format string, args ...any) {
	h.step++
	h.rt.Logf("#%d "+format, append([]any{h.step}, args...)...)
}

func (h *limitHarness) fatalf(format string, args ...any) {
	h.rt.Fatalf("#%d "+format, append([]any{h.step}, args...)...)
}

// settle records the waiters woken by the last call, then checks.
func (h *limitHarness) settle() {
	for _, r := range h.wl.take() {
		h.woken[r] = true
	}
	h.check(h.rt)
}

// lose arms the dropper to lose the reply of the last call of script
// (skip calls answered first), and disarms it after fn.
func (h *limitHarness) lose(script string, skip int, fn func()) {
	h.dropper.loseAfter(script, skip, 1)
	fn()
	h.dropper.mu.Lock()
	clear(h.dropper.drop)
	clear(h.dropper.skip)
	h.dropper.mu.Unlock()
}

func (h *limitHarness) setLimit(rt *rapid.T) {
	k := rapid.SampledFrom(lmKeys).Draw(rt, "key")
	c := rapid.IntRange(1, 3).Draw(rt, "concurrency")
	h.logf("set limit %s concurrency %d (was %d)", k, c, h.conc[k])
	if err := h.tb.store.SetLimit(h.tb.ctx, fence.Limit{Name: k, Concurrency: c}); err != nil {
		h.fatalf("set limit: %v", err)
	}
	h.conc[k] = c
	h.settle()
}

// deleteLimit deletes a limit: it holds no node back from then on (its
// concurrency reads 0 in the model), until set again.
func (h *limitHarness) deleteLimit(rt *rapid.T) {
	k := rapid.SampledFrom(lmKeys).Draw(rt, "key")
	h.logf("delete limit %s (concurrency %d)", k, h.conc[k])
	found, err := h.tb.store.DeleteLimit(h.tb.ctx, k)
	if err != nil || found != (h.conc[k] > 0) {
		h.fatalf("delete limit: %v, %v", found, err)
	}
	h.conc[k] = 0
	h.settle()
}

func (h *limitHarness) submit(rt *rapid.T) {
	var free []string
	for _, r := range lmRuns {
		if h.runs[r] == nil {
			free = append(free, r)
		}
	}
	if len(free) == 0 {
		rt.Skip("every run submitted")
	}
	run := rapid.SampledFrom(free).Draw(rt, "run")
	limits := rapid.SampledFrom(lmLimits).Draw(rt, "limits")
	h.logf("submit %s limits %s", run, limits)
	a := spec(run, node("a").attempts(lmAttempts))
	a.Nodes[0].Limits = limits
	if _, err := h.tb.store.Submit(h.tb.ctx, a); err != nil {
		h.fatalf("submit: %v", err)
	}
	var keys []string
	for _, p := range strings.Split(limits, ",") {
		k, _, _ := strings.Cut(p, "=")
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h.runs[run] = &lmRun{limits: limits, keys: keys, state: "READY"}
	h.settle()
}

// pick draws a submitted run whose state is one of states (any if none).
func (h *limitHarness) pick(rt *rapid.T, label string, states ...string) string {
	var ids []string
	for _, r := range lmRuns {
		if m := h.runs[r]; m != nil && (len(states) == 0 || slices.Contains(states, m.state)) {
			ids = append(ids, r)
		}
	}
	if len(ids) == 0 {
		rt.Skip("no run to " + label)
	}
	return rapid.SampledFrom(ids).Draw(rt, label)
}

func (h *limitHarness) claim(rt *rapid.T) {
	run := h.pick(rt, "claim")
	m := h.runs[run]
	lost := rapid.Bool().Draw(rt, "lost")
	h.seq++
	id := fmt.Sprintf("c%d", h.seq)
	worker := fmt.Sprintf("w%d", h.seq)
	before := h.keyStates()
	h.logf("claim %s as %s (reply lost: %v)", run, id, lost)
	if lost {
		// The call that would claim is the second (the first learns the
		// node's limit keys); a refused first call answers for itself.
		h.lose("claim", 1, func() { _, _ = h.lossy.ClaimAs(h.tb.ctx, ref(run, "a"), worker, id, lmLease, lmGrace) })
	}
	c, err := h.tb.store.ClaimAs(h.tb.ctx, ref(run, "a"), worker, id, lmLease, lmGrace)
	var exp *fence.ExpiredError
	switch {
	case m.state == "SUCCEEDED" || m.state == "FAILED" || m.state == "CANCELLED":
		if !errors.Is(err, fence.ErrNotFound) { // a packed run's node is no longer found to claim
			h.want("claim", err, fence.ErrNodeDone)
		}
	case m.state == "RUNNING" && !m.expired:
		h.want("claim", err, fence.ErrNodeBusy)
	case m.state == "RUNNING" && errors.As(err, &exp):
		if !m.cancelled && m.counted < lmAttempts {
			h.fatalf("claim: expired with attempts left and the run not cancelled: %v", err)
		}
		if _, err := h.tb.store.Expire(h.tb.ctx, exp, worker, lmGrace); err != nil {
			h.fatalf("expire: %v", err)
		}
		h.stale = append(h.stale, m.lease)
		m.state = map[bool]string{true: "CANCELLED", false: "FAILED"}[m.cancelled]
	case err == nil:
		if m.state == "RUNNING" {
			if c.PrevOwner == "" {
				h.fatalf("claim: a takeover without a previous owner")
			}
			h.stale = append(h.stale, m.lease)
		}
		if c.Limits != m.limits {
			h.fatalf("claim: limits %q, the node names %q", c.Limits, m.limits)
		}
		slots := map[string]bool{}
		for _, k := range m.keys {
			// A takeover moves the slots the last claim held.
			slots[k] = h.conc[k] > 0 || (m.state == "RUNNING" && m.slots[k])
		}
		m.state, m.lease, m.expired, m.slots = "RUNNING", c.Lease, false, slots
		m.counted++
		delete(h.woken, run)
	case errors.Is(err, fence.ErrLimitWait) && (m.state == "READY" || h.slotless(m)):
		// A node waiting under one key keeps a slot handed to it under an
		// earlier one: it stays woken.
		h.mayWait(run, before, err)
		m.runWait = m.runWait || m.state == "RUNNING"
	default:
		h.fatalf("claim: the store answered %v (node %s)", err, m.state)
	}
	h.rt.Logf("     -> %v", err)
	h.settle()
}

// slotless reports whether m runs without a slot of a key that has a
// concurrency now (it started while the key had none): its takeover
// takes a slot as a new claim does, and may wait for one.
func (h *limitHarness) slotless(m *lmRun) bool {
	for _, k := range m.keys {
		if h.conc[k] > 0 && !m.slots[k] {
			return m.state == "RUNNING" && m.expired
		}
	}
	return false
}

// want requires err to be target (or nil for a nil target).
func (h *limitHarness) want(what string, err, target error) {
	if (target == nil && err != nil) || (target != nil && !errors.Is(err, target)) {
		h.fatalf("%s: the store answered %v, the model says %v", what, err, target)
	}
}

func (h *limitHarness) heartbeat(rt *rapid.T) {
	l, current := h.pickLease(rt)
	h.logf("heartbeat %s claim %s (current: %v)", l.Run, l.ClaimID, current)
	_, err := h.tb.store.Heartbeat(h.tb.ctx, l, lmLease, -1)
	if current && h.lostWithoutSlot(l.Run, err) {
		h.logf("     -> %v", err)
	} else if current {
		h.want("heartbeat", err, nil)
		h.runs[l.Run].expired = false
	} else if err == nil || !fence.IsFenced(err) {
		h.fatalf("heartbeat of a stale lease: %v", err)
	}
	h.settle()
}

// lostWithoutSlot reports whether err is a cluster's refusal of a heartbeat of
// run's lease whose claim took no slot of a limit that had no concurrency
// then and has some now, with no room: limit_extend.lua gives such a claim
// a slot only while one is free, or refuses its lease (limitcluster.go).
// One server lets it run on without a slot.
func (h *limitHarness) lostWithoutSlot(run string, err error) bool {
	if h.tb.be.Name != "cluster" || !errors.Is(err, fence.ErrNotOwner) {
		return false
	}
	m := h.runs[run]
	for _, k := range m.keys {
		if h.conc[k] > 0 && !m.slots[k] {
			return true
		}
	}
	return false
}

// pickLease draws a lease: a current one of a RUNNING node, or a stale one.
func (h *limitHarness) pickLease(rt *rapid.T) (fence.Lease, bool) {
	var all []fence.Lease
	for _, r := range lmRuns {
		if m := h.runs[r]; m != nil && m.state == "RUNNING" {
			all = append(all, m.lease)
		}
	}
	cur := len(all)
	all = append(all, h.stale...)
	if len(all) == 0 {
		rt.Skip("no lease")
	}
	i := rapid.IntRange(0, len(all)-1).Draw(rt, "lease")
	return all[i], i < cur
}

// pause lets a running node's owner stop heartbeating past its lease: a
// heartbeat of 1 ms, then Redis's clock past it and the grace.
func (h *limitHarness) pause(rt *rapid.T) {
	run := h.pick(rt, "pause", "RUNNING")
	m := h.runs[run]
	h.logf("pause the owner of %s (claim %s) past its lease", run, m.lease.ClaimID)
	if _, err := h.tb.store.Heartbeat(h.tb.ctx, m.lease, time.Millisecond, -1); err != nil {
		h.fatalf("short heartbeat: %v", err)
	}
	h.tb.be.Advance(h.t, 5*time.Millisecond)
	m.expired = true
	h.settle()
}

func (h *limitHarness) end(rt *rapid.T) {
	l, current := h.pickLease(rt)
	op := rapid.SampledFrom([]string{"commit", "fail", "final", "release"}).Draw(rt, "op")
	lost := rapid.Bool().Draw(rt, "lost")
	m := h.runs[l.Run]
	h.logf("%s %s claim %s (current: %v, reply lost: %v)", op, l.Run, l.ClaimID, current, lost)
	do := func(s *fence.Store) error {
		var err error
		switch op {
		case "commit":
			_, err = s.Commit(h.tb.ctx, l, []byte(`1`), nil)
		case "fail", "final":
			_, err = s.Fail(h.tb.ctx, l, fence.Failure{Err: "boom", Final: op == "final"}, nil)
		case "release":
			_, err = s.Release(h.tb.ctx, l, "shutdown")
		}
		return err
	}
	if lost && current {
		h.lose(map[string]string{"commit": "commit", "fail": "fail", "final": "fail", "release": "release"}[op], 0,
			func() { _ = do(h.lossy) })
	}
	script := map[string]string{"commit": "commit", "fail": "fail", "final": "fail", "release": "release"}[op]
	err := do(h.tb.store)
	if !current {
		// The same end again answers as the first time (a resend after a
		// lost reply, recognised among the node's last 8 ends); any other
		// is fenced.
		if err == nil && h.endBy[l.ClaimID] != script {
			h.fatalf("%s of a stale lease accepted (it ended by %q)", op, h.endBy[l.ClaimID])
		}
		h.rt.Logf("     -> %v", err)
		h.settle()
		return
	}
	if err != nil {
		h.fatalf("%s of the current lease: %v", op, err)
	}
	h.stale = append(h.stale, l)
	h.endBy[l.ClaimID] = script
	switch {
	case op == "commit":
		m.state = "SUCCEEDED"
	case op == "release":
		m.state = "READY"
		m.counted--
	case m.cancelled:
		m.state = "CANCELLED"
	case op == "final" || m.counted >= lmAttempts:
		m.state = "FAILED"
	default:
		m.state = "READY"
	}
	if m.cancelled {
		// The end of a node of a cancelled run: what the store made of it
		// (the model checks its slots, not the cancel's rules).
		info, err := h.tb.store.GetRun(h.tb.ctx, l.Run)
		if err != nil {
			h.fatalf("read run: %v", err)
		}
		m.state = info.Nodes[0].State
	}
	h.settle()
}

func (h *limitHarness) cancel(rt *rapid.T) {
	run := h.pick(rt, "cancel")
	m := h.runs[run]
	h.logf("cancel %s (%s)", run, m.state)
	_, err := h.tb.store.Cancel(h.tb.ctx, run, "test", "me")
	switch m.state {
	case "READY":
		h.want("cancel", err, nil)
		m.state, m.cancelled = "CANCELLED", true
	case "RUNNING":
		h.want("cancel", err, nil)
		m.cancelled = true
	default:
		if err != nil && !errors.Is(err, fence.ErrRunDone) {
			h.fatalf("cancel of an ended run: %v", err)
		}
	}
	h.settle()
}

func (h *limitHarness) pack(rt *rapid.T) {
	h.logf("pack the ended runs")
	if _, err := h.tb.store.RetainFinished(h.tb.ctx, time.Hour, 100); err != nil {
		h.fatalf("retain: %v", err)
	}
	h.settle()
}

// modelBackends are the backends of the model tests: miniredis, a real
// redis-server, and a real 3-master Redis Cluster, where a limit's keys
// live in other slots than its nodes' and a claim or free under limits
// takes several scripts (limitcluster.go).
func modelBackends(t *testing.T) []redistest.Backend {
	t.Helper()
	rc := redistest.StartCluster(t, redistest.ClusterOptions{})
	return append(redistest.Backends(t), redistest.Backend{Name: "cluster", Client: rc.Client()})
}

// flushAll empties every master of c.
func flushAll(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushAll(ctx).Err() })
	}
	return c.FlushAll(ctx).Err()
}
