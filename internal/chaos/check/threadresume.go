package check

import (
	"cmp"
	"fmt"

	"github.com/batonrun/baton/fence"
)

// latestBefore is the thread's newest checkpoint in the namespace at t:
// the highest version accepted before t whose run was not rolled back by
// then. ambiguous: another checkpoint was accepted in the same ms as t
// (other than skip).
func latestBefore(cs []*ckEvent, t int64, skip *ckEvent, removed map[string]int64) (best *ckEvent, ambiguous bool) {
	for _, c := range cs {
		if c == skip {
			continue
		}
		if c.at == t {
			ambiguous = true
		}
		if c.at >= t {
			continue
		}
		if at, ok := removed[c.run.id]; ok && at <= t {
			continue
		}
		if best == nil || c.version > best.version {
			best = c
		}
	}
	return best, ambiguous
}

// checkResumes: the first save of every attempt says what the attempt
// resumed from (Step.From, FromV); that must be the thread's newest
// checkpoint of the namespace, rolled-back runs' removed. After an
// interrupt, that is the interrupted run's last checkpoint; after a
// rollback, the newest from before the rolled-back run.
func checkResumes(cks map[ThreadNS][]*ckEvent, seen map[ThreadNS]map[int64]SeenCheckpoint,
	removed, undecided map[string]int64, byID map[string]*trun, fig *ThreadFigures) []Violation {
	var out []Violation
	for _, k := range sortedKeys(cks) {
		cs := cks[k]
		tags := map[string]int64{} // tag -> version, from the data read back
		for v, sc := range seen[k] {
			if st, ok := ParseStep(sc.Data); ok {
				tags[st.Tag] = v
			}
		}
		firstOfRun := map[string]*ckEvent{}
		for _, c := range cs {
			if firstOfRun[c.run.id] == nil {
				firstOfRun[c.run.id] = c
			}
		}
		for _, c := range cs {
			sc, ok := seen[k][c.version]
			if !ok {
				continue
			}
			st, ok := ParseStep(sc.Data)
			ref, err := ParseTag(st.Tag)
			if !ok || err != nil || ref.Seq != 1 {
				continue // not an attempt's first save
			}
			if u, ok := undecided[k.Thread]; ok && c.at >= u {
				fig.Undecided++
				continue
			}
			want, ambiguous := latestBefore(cs, c.at, c, removed)
			got, lenient, known := resolveFrom(st, tags, cs)
			if ambiguous || !known {
				fig.Undecided++
				continue
			}
			fig.Resumes++
			var wantV int64
			if want != nil {
				wantV = want.version
			}
			if got == wantV {
				continue
			}
			if lenient != nil && want != nil && lenient.Run == want.run.id && lenient.Node == want.node &&
				lenient.Epoch == want.epoch && got <= wantV {
				continue // an exec attempt's rank can lag its seq (a save that failed without fencing)
			}
			name, why := "resume", "a new attempt of the run"
			if firstOfRun[c.run.id] == c {
				w := c.run
				why = "the run's first attempt in the namespace"
				for a, at := range removed {
					if at == w.start {
						name, why = "rollback", "the first run after rolling back "+a
					}
				}
				if name == "resume" && w.strategy == "rollback" {
					name, why = "rollback", "a rollback run"
				}
				if name == "resume" && w.strategy == "interrupt" && w.queued {
					if a := byID[w.behind]; a != nil {
						if running, _ := targets(w, a); running {
							name, why = "interrupt", "the run that interrupted "+a.id
						}
					}
				}
			}
			wantS := "none"
			if want != nil {
				wantS = want.String()
			}
			out = append(out, Violation{Check: name, Run: c.run.id, Node: c.node,
				Msg: fmt.Sprintf("thread %s ns %s: %s (%s) started from %s, but the thread's newest checkpoint then was %s",
					k.Thread, k.NS, c, why, fromString(st, got), wantS)})
		}
	}
	return out
}

// resolveFrom finds the version st.From names: the writer's FromV, the
// data read back, or else the rank of its seq among its attempt's accepted
// checkpoints (lenient is then set: a save that failed without being
// fenced shifts the ranks). known is false when nothing tells.
func resolveFrom(st Step, tags map[string]int64, cs []*ckEvent) (v int64, lenient *TagRef, known bool) {
	switch {
	case st.From == "":
		return 0, nil, true
	case st.FromV > 0:
		return st.FromV, nil, true
	}
	if v, ok := tags[st.From]; ok {
		return v, nil, true
	}
	ref, err := ParseTag(st.From)
	if err != nil {
		return 0, nil, false
	}
	var mine []int64
	for _, c := range cs {
		if c.run.id == ref.Run && c.node == ref.Node && c.epoch == ref.Epoch {
			mine = append(mine, c.version)
		}
	}
	if ref.Seq < 1 || int(ref.Seq) > len(mine) {
		return 0, nil, false
	}
	return mine[ref.Seq-1], &ref, true
}

func fromString(st Step, v int64) string {
	if st.From == "" {
		return "no checkpoint"
	}
	return fmt.Sprintf("v%d (%s)", v, st.From)
}

// checkFinal: once every run ended, each namespace read back holds no
// checkpoint of a rolled-back run, its newest is the newest accepted one
// not rolled back, and no other checkpoint is gone that the history cap
// cannot explain.
func checkFinal(ti *ThreadInput, cks map[ThreadNS][]*ckEvent, seen map[ThreadNS]map[int64]SeenCheckpoint,
	removed, undecided map[string]int64) []Violation {
	h := cmp.Or(ti.History, fence.DefaultCheckpointHistory)
	stored := map[ThreadNS][]int64{}
	for _, c := range ti.Checkpoints {
		if c.Final {
			k := ThreadNS{c.Thread, c.NS}
			stored[k] = append(stored[k], c.Version)
		}
	}
	var out []Violation
	for _, k := range ti.Final {
		if _, ok := undecided[k.Thread]; ok {
			continue
		}
		cs := cks[k]
		byV := map[int64]*ckEvent{}
		rolled := false
		for _, c := range cs {
			byV[c.version] = c
			if _, ok := removed[c.run.id]; ok {
				rolled = true
			}
		}
		have := map[int64]bool{}
		var top int64
		for _, v := range stored[k] {
			have[v] = true
			top = max(top, v)
			c, ok := byV[v]
			switch {
			case !ok:
				sc := seen[k][v]
				out = append(out, Violation{Check: "ckpt_fence", Run: sc.Run, Node: sc.Node,
					Msg: fmt.Sprintf("thread %s ns %s: v%d is stored (epoch %d) but no run of the thread recorded it",
						k.Thread, k.NS, v, sc.Epoch)})
			case removed[c.run.id] != 0:
				out = append(out, Violation{Check: "rollback", Run: c.run.id, Node: c.node,
					Msg: fmt.Sprintf("thread %s ns %s: %s is still stored, but its run was rolled back at %s",
						k.Thread, k.NS, c, stampMS(removed[c.run.id]))})
			}
		}
		var want *ckEvent
		var gone []string
		for i, c := range cs {
			if _, ok := removed[c.run.id]; ok {
				continue
			}
			want = c
			if !have[c.version] && len(cs)-1-i < h {
				gone = append(gone, c.String())
			}
		}
		var wantV int64
		wantS := "none"
		if want != nil {
			wantV, wantS = want.version, want.String()
		}
		if top != wantV {
			name := "ckpt_lost"
			if rolled {
				name = "rollback"
			}
			out = append(out, Violation{Check: name, Run: k.Thread,
				Msg: fmt.Sprintf("thread %s ns %s: the newest checkpoint stored at the end is v%d, want %s", k.Thread,
					k.NS, top, wantS)})
		}
		if len(gone) > 0 {
			out = append(out, Violation{Check: "ckpt_lost", Run: k.Thread,
				Msg: fmt.Sprintf("thread %s ns %s: %d checkpoints of runs never rolled back are gone, fewer than %d newer: %s",
					k.Thread, k.NS, len(gone), h, clipList(gone, 5))})
		}
	}
	return out
}

func clipList(s []string, n int) string {
	if len(s) <= n {
		return fmt.Sprint(s)
	}
	return fmt.Sprintf("%v ... (%d more)", s[:n], len(s)-n)
}
