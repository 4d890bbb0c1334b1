package fence_test

// The comparison TestThreadModel makes after every step: each thread's
// view, each run with its nodes, and each namespace's checkpoints with
// their pending writes, against the model (threadmodel_model_test.go).
// Where the contract lets the store choose (a cancelled run left in a
// queue, a checkpoint past the cap), the model follows what the store did.

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/batonrun/baton/fence"
)

func (h *harness) check(rt *rapid.T) {
	for _, t := range tmViews {
		h.checkThread(rt, t)
	}
	for _, id := range h.runIDs() {
		h.checkRun(rt, id)
	}
	for _, t := range tmViews {
		for _, ns := range tmNS {
			h.checkCheckpoints(rt, t, ns)
		}
	}
}

func (h *harness) mismatch(rt *rapid.T, what string, got, want any) {
	rt.Helper()
	rt.Fatalf("after #%d: %s: the store has %v, the contract says %v", h.step, what, got, want)
}

func (h *harness) checkThread(rt *rapid.T, t string) {
	info, err := h.store.Thread(h.ctx, t)
	if err != nil && !errors.Is(err, fence.ErrNotFound) {
		rt.Fatalf("thread %s: %v", t, err)
	}
	var queue []string
	if info != nil {
		queue = info.Queued
	}
	// A run cancelled while queued may leave the queue at cancel or at the
	// next promotion: follow the store.
	if th := h.m.threads[t]; th != nil {
		var kept []string
		j := 0
		for _, q := range th.queue {
			if j < len(queue) && queue[j] == q {
				kept = append(kept, q)
				j++
				continue
			}
			if h.m.runs[q].status != stCancelled {
				h.mismatch(rt, "thread "+t+" queue", queue, th.queue)
			}
		}
		if j != len(queue) {
			h.mismatch(rt, "thread "+t+" queue", queue, th.queue)
		}
		th.queue = kept
	} else if len(queue) > 0 {
		h.mismatch(rt, "thread "+t+" queue", queue, "[]")
	}
	if !h.m.threadExists(t) {
		if err == nil {
			h.mismatch(rt, "thread "+t, fmt.Sprintf("active %q (%s), checkpoints %v", info.Active, info.ActiveStatus,
				info.Checkpoints), "no such thread")
		}
		return
	}
	if err != nil {
		h.mismatch(rt, "thread "+t, "no such thread", fmt.Sprintf("active %q", h.m.active(t)))
	}
	a := h.m.active(t)
	want := fmt.Sprintf("active %q (%s)", a, statusOf(h.m, a))
	if got := fmt.Sprintf("active %q (%s)", info.Active, info.ActiveStatus); got != want {
		h.mismatch(rt, "thread "+t, got, want)
	}
	if got, want := mapString(info.Checkpoints), mapString(h.m.nsVersions(t)); got != want {
		h.mismatch(rt, "thread "+t+" newest checkpoint per namespace", got, want)
	}
}

func statusOf(m *model, run string) string {
	if r := m.runs[run]; r != nil {
		return r.status
	}
	return ""
}

func (h *harness) checkRun(rt *rapid.T, id string) {
	r := h.m.runs[id]
	info, err := h.store.GetRun(h.ctx, id)
	if err != nil {
		h.mismatch(rt, "run "+id, err, r.status)
	}
	var nodes []string
	for _, n := range info.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s:%s@%d#%d", n.ID, n.State, n.Epoch, n.Attempt))
	}
	got := fmt.Sprintf("%s cancel=%v %v", info.Status, info.Cancelled, nodes)
	nodes = nil
	for _, n := range r.nodes {
		nodes = append(nodes, fmt.Sprintf("%s:%s@%d#%d", n.id, n.state, n.epoch, n.attempt))
	}
	if want := fmt.Sprintf("%s cancel=%v %v", r.status, r.cancel, nodes); got != want {
		h.mismatch(rt, "run "+id, got, want)
	}
}

func (h *harness) checkCheckpoints(rt *rapid.T, t, ns string) {
	list, _, err := h.store.Checkpoints(h.ctx, t, ns, 0, 100)
	if err != nil {
		rt.Fatalf("checkpoints of %s ns %q: %v", t, ns, err)
	}
	var got []string
	for i := len(list) - 1; i >= 0; i-- { // oldest first, as the model
		cp := list[i]
		got = append(got, fmt.Sprintf("v%d:%s by %s/%s@%d(%s)", cp.Version, cp.ID, cp.Run, cp.Node, cp.Epoch, cp.Worker))
	}
	var mlist []*mCkpt
	if c := h.m.ck[t]; c != nil {
		mlist = c.ns[ns]
	}
	var want []string
	for _, cp := range mlist {
		s := ckptString(cp)
		if cp.optional {
			s += "?"
		}
		want = append(want, s)
	}
	var kept []*mCkpt
	j := 0
	for _, cp := range mlist {
		if s := ckptString(cp); j < len(got) && got[j] == s {
			kept = append(kept, cp)
			j++
			continue
		}
		if !cp.optional {
			j = -1
			break
		}
	}
	if j != len(got) {
		h.mismatch(rt, fmt.Sprintf("checkpoints of %s ns %q", t, ns), got, want)
	}
	if c := h.m.ck[t]; c != nil {
		c.ns[ns] = kept
	}
	for _, id := range h.ids[t][ns] {
		pw, err := h.store.PendingWrites(h.ctx, t, ns, id)
		if err != nil {
			rt.Fatalf("pending writes of %s ns %q %s: %v", t, ns, id, err)
		}
		var gw []string
		for _, w := range pw {
			gw = append(gw, fmt.Sprintf("%s|%d=%s", w.Task, w.Idx, w.Value))
		}
		sort.Strings(gw)
		wantW := ""
		if cp := h.m.findCkpt(t, ns, id); cp != nil {
			wantW = writesString(cp.writes)
		}
		if g := strings.Join(gw, ","); g != wantW {
			h.mismatch(rt, fmt.Sprintf("pending writes of %s ns %q checkpoint %s", t, ns, id), "["+g+"]", "["+wantW+"]")
		}
	}
}
