package fence_test

// The invariants TestLimitModel (limitmodel_test.go) checks after every
// step, against what is stored.

import (
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/batonrun/baton/fence"
)

// mayWait checks that a claim told to wait had a reason to under the
// state before it: a key whose slots are all held or handed to others,
// or one where others wait ahead of it, or a slot handed to it that a
// lowered limit took back.
func (h *limitHarness) mayWait(run string, before map[string]lmKey, err error) {
	ref := fence.Ref(run, run, "a")
	for _, k := range h.runs[run].keys {
		st := before[k]
		mine := st.holders[ref]
		if strings.HasPrefix(mine, "r:") {
			if st.claims >= h.conc[k] {
				return
			}
			continue
		}
		if mine != "" {
			continue
		}
		if h.conc[k] == 0 {
			continue // no limit: no reason to wait
		}
		ahead := slices.Index(st.waiters, ref)
		if ahead < 0 {
			ahead = len(st.waiters)
		}
		if len(st.holders)+ahead >= h.conc[k] {
			return
		}
	}
	h.fatalf("claim of %s waits (%v) while every key had a slot for it: %+v", run, err, before)
}

// lmKey is one limit key's state as stored.
type lmKey struct {
	holders map[string]string // ref -> claim id, or "r:..." for a handed slot
	waiters []string          // refs, first first
	claims  int
}

func (h *limitHarness) keyStates() map[string]lmKey {
	out := map[string]lmKey{}
	for _, k := range lmKeys {
		all, err := h.tb.be.Client.HGetAll(h.tb.ctx, fence.Keys{}.LimitHolders(k)).Result()
		if err != nil {
			h.fatalf("read holders: %v", err)
		}
		delete(all, "~c")
		for ref, v := range all {
			// On a cluster a holder also says until when it holds
			// ("claim@ms", limitcluster.go): the model knows claims.
			if !strings.HasPrefix(v, "r:") {
				all[ref], _, _ = strings.Cut(v, "@")
			}
		}
		ws, err := h.tb.be.Client.ZRange(h.tb.ctx, fence.Keys{}.LimitWaiters(k), 0, -1).Result()
		if err != nil {
			h.fatalf("read waiters: %v", err)
		}
		st := lmKey{holders: all}
		for _, w := range ws {
			r, _, _ := strings.Cut(w, "|")
			st.waiters = append(st.waiters, r)
		}
		for _, v := range all {
			if !strings.HasPrefix(v, "r:") {
				st.claims++
			}
		}
		out[k] = st
	}
	return out
}

// check holds the invariants against what is stored.
func (h *limitHarness) check(*rapid.T) {
	for k, st := range h.keyStates() {
		// Every running claim holds one slot of each of its node's keys;
		// every slot held by a claim is a running claim's.
		for _, r := range lmRuns {
			m := h.runs[r]
			if m == nil || m.state != "RUNNING" || !m.slots[k] {
				continue
			}
			if got := st.holders[fence.Ref(r, r, "a")]; got != m.lease.ClaimID {
				h.fatalf("key %s: running %s (claim %s) holds %q", k, r, m.lease.ClaimID, got)
			}
		}
		for ref, v := range st.holders {
			if strings.HasPrefix(v, "r:") {
				_, run, _, _ := fence.ParseRef(ref)
				if !h.woken[run] {
					h.fatalf("key %s: a slot handed to %s, which was never woken", k, run)
				}
				continue
			}
			_, run, _, _ := fence.ParseRef(ref)
			if m := h.runs[run]; m == nil || m.state != "RUNNING" || m.lease.ClaimID != v {
				h.fatalf("key %s: claim %s of %s holds a slot, but has ended", k, v, run)
			}
		}
		if h.conc[k] == 0 {
			// Deleted: no node waits for it; claims took no slot of it.
			if len(st.waiters) > 0 {
				h.fatalf("key %s: deleted, and %v wait", k, st.waiters)
			}
			h.claims[k] = st.claims
			continue
		}
		// Never more than the concurrency, from each change on.
		if st.claims > h.conc[k] && st.claims > h.claims[k] {
			h.fatalf("key %s: %d claims hold slots under a concurrency of %d (was %d)", k, st.claims, h.conc[k], h.claims[k])
		}
		h.claims[k] = st.claims
		// No slot stays free while a node waits for it.
		if free := h.conc[k] - len(st.holders); free > 0 && len(st.waiters) > 0 {
			h.fatalf("key %s: %d free and %v waiting", k, free, st.waiters)
		}
		for _, w := range st.waiters {
			_, run, _, _ := fence.ParseRef(w)
			// A takeover of a node that runs without a slot (claimed while
			// the key had no concurrency) queues it as any claim; its old
			// owner may still end it meanwhile.
			// On a cluster a cancel cannot reach the limit's slot in its
			// script: the cancelled waiter stays queued, and the slot
			// handed to it goes back at its claim (limitcluster.go).
			m := h.runs[run]
			cancelledOnCluster := h.tb.be.Name == "cluster" && m != nil && m.state == "CANCELLED"
			if m == nil || (m.state != "READY" && !(m.runWait && !m.slots[k]) && !cancelledOnCluster) {
				h.fatalf("key %s: %s waits, but is not READY", k, run)
			}
		}
	}
}
