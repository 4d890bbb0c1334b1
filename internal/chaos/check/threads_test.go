package check

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// conv builds a hand-made history of one thread "T" (namespace "ns"):
// runs with their events, the checkpoints they saved and what was read
// back. Times are ms after t0.
type conv struct {
	in   Input
	runs map[string]*convRun
}

type convRun struct {
	c  *conv
	id string
}

func newConv() *conv {
	return &conv{in: Input{Runs: map[string]RunFinal{}, Threads: &ThreadInput{}}, runs: map[string]*convRun{}}
}

// run adds an accepted run submitted at `at`: thread-less when strategy is
// "", else queued behind `behind` when that is not "".
func (c *conv) run(id, strategy, behind string, at int64) *convRun {
	s := Submit{Run: id, Thread: "T", Strategy: strategy, Outcome: SubmitAccepted, Status: "RUNNING", Behind: behind}
	if strategy == "" {
		s.Thread = ""
	}
	c.in.Threads.Submits = append(c.in.Threads.Submits, s)
	c.in.Runs[id] = RunFinal{Info: &fence.RunInfo{ID: id, Status: "SUCCEEDED"}}
	r := &convRun{c: c, id: id}
	c.runs[id] = r
	r.ev("submitted", "", 0, at, nil)
	if behind != "" {
		r.ev("queued", "", 0, at, map[string]string{"behind": behind})
	}
	return r
}

func (r *convRun) ev(typ, node string, epoch, at int64, d map[string]string) *convRun {
	f := r.c.in.Runs[r.id]
	f.Events = append(f.Events, ev(typ, node, epoch, "w", at, d))
	r.c.in.Runs[r.id] = f
	return r
}

func (r *convRun) started(at int64) *convRun { return r.ev("started", "", 0, at, nil) }
func (r *convRun) finished(at int64) *convRun {
	return r.ev("run_finished", "", 0, at, map[string]string{"status": "SUCCEEDED"})
}
func (r *convRun) cancel(at int64) *convRun { return r.ev("cancel_requested", "", 0, at, nil) }
func (r *convRun) cancelBy(at int64, reason string) *convRun {
	return r.ev("cancel_requested", "", 0, at, map[string]string{"reason": reason})
}

// claim: node n at epoch e, claimed at `at` with claim id "c<e>" (in the
// histories too).
func (r *convRun) claim(e, at int64) *convRun {
	typ := "claimed"
	if e > 1 {
		typ = "takeover"
	}
	r.c.in.Ops = append(r.c.in.Ops, Op{Worker: "w", Op: "claim", Thread: "T", Run: r.id, Node: "n", Epoch: e,
		Claim: "c" + strconv.FormatInt(e, 10), Call: ms(at), Ret: ms(at), Outcome: OK})
	return r.ev(typ, "n", e, at, nil)
}

// save: version v accepted at `at` from node n at epoch e, its seq-th
// save, resumed from `from` (a tag; fromV its version, 0 unknown).
func (r *convRun) save(v, e, seq, at int64, from string, fromV int64) *convRun {
	return r.saveAs(v, e, seq, at, from, fromV, "c"+strconv.FormatInt(e, 10))
}

func (r *convRun) saveAs(v, e, seq, at int64, from string, fromV int64, claim string) *convRun {
	st := Step{Tag: MakeTag(r.id, "n", e, seq), Token: fmt.Sprintf("%s/n@%d/%s", r.id, e, claim), From: from,
		FromV: fromV, I: v}
	data, _ := json.Marshal(st)
	r.c.in.Threads.Checkpoints = append(r.c.in.Threads.Checkpoints, SeenCheckpoint{Checkpoint: fence.Checkpoint{
		Thread: "T", NS: "ns", Version: v, ID: "id" + strconv.FormatInt(v, 10), Data: data, Run: r.id, Node: "n",
		Epoch: e, At: time.Unix(0, ms(at))}, Seen: ms(at + 1)})
	return r.ev("checkpointed", "n", e, at, map[string]string{"ns": "ns", "version": strconv.FormatInt(v, 10)})
}

// final says namespace "ns" was read at the end and held versions.
func (c *conv) final(versions ...int64) {
	c.in.Threads.Final = []ThreadNS{{"T", "ns"}}
	var kept []SeenCheckpoint
	for _, s := range c.in.Threads.Checkpoints {
		if !s.Final {
			kept = append(kept, s)
		}
	}
	c.in.Threads.Checkpoints = kept
	for _, v := range versions {
		for _, s := range c.in.Threads.Checkpoints {
			if s.Version == v && !s.Final {
				s.Final = true
				c.in.Threads.Checkpoints = append(c.in.Threads.Checkpoints, s)
				break
			}
		}
	}
}

func (c *conv) check(t *testing.T) (Report, []string) {
	t.Helper()
	var r Report
	vs := checkThreads(c.in, &r)
	for _, v := range vs {
		t.Log(v)
	}
	return r, checks(vs)
}

func tag(run string, e, seq int64) string { return MakeTag(run, "n", e, seq) }

// legalConv: r1 saves v1..v4 and is interrupted by r2 (submitted at 500,
// r1 still saves v4 before it stops); r2 resumes from v4, saves v5 and v6,
// and is rolled back by r3, which starts from v4 again.
func legalConv() *conv {
	c := newConv()
	c.run("r1", "reject", "", 0).claim(1, 10).
		save(1, 1, 1, 100, "", 0).save(2, 1, 2, 200, tag("r1", 1, 1), 1).save(3, 1, 3, 300, tag("r1", 1, 2), 2).
		cancel(500).save(4, 1, 4, 600, tag("r1", 1, 3), 3).finished(1000)
	c.run("r2", "interrupt", "r1", 500).started(1000).claim(1, 1010).
		save(5, 1, 1, 1100, tag("r1", 1, 4), 4).save(6, 1, 2, 1200, tag("r2", 1, 1), 5).cancel(1300).finished(1500)
	c.run("r3", "rollback", "r2", 1300).started(1500).claim(1, 1510).
		save(7, 1, 1, 1600, tag("r1", 1, 4), 0).finished(1700)
	c.final(1, 2, 3, 4, 7)
	return c
}

func TestLegalConversationPasses(t *testing.T) {
	t.Parallel()
	r, vs := legalConv().check(t)
	require.Empty(t, vs)
	require.Equal(t, 1, r.Threads.Rollbacks)
	require.Equal(t, 3, r.Threads.Resumes, "r1 fresh, r2 after the interrupt, r3 after the rollback")
	require.Equal(t, 7, r.Threads.Checkpoints)
	require.Equal(t, map[string]int{"reject": 1, "interrupt": 1, "rollback": 1}, r.Threads.Runs)
}

// A run of the thread starts while another is still active (a run
// without a thread whose id is the thread's, started beside it).
func TestTwoActiveRunsAreReported(t *testing.T) {
	t.Parallel()
	c := legalConv()
	c.run("T", "", "", 1550).claim(1, 1560).finished(1650)
	_, vs := c.check(t)
	require.ElementsMatch(t, []string{"thread_active", "ckpt_fence"}, vs, "and r3 saved while T was active")
}

func TestQueuedRunNeverStartedOrStartedAfterWithdrawalIsReported(t *testing.T) {
	t.Parallel()
	c := legalConv()
	c.run("r4", "enqueue", "r3", 1650) // never started, never cancelled
	_, vs := c.check(t)
	require.Equal(t, []string{"thread_queue"}, vs)

	c = legalConv()
	c.run("r4", "enqueue", "r3", 1650).cancel(1660).started(1700).finished(1710)
	_, vs = c.check(t)
	require.Contains(t, vs, "thread_queue")
}

// The interrupt's cancel of the active run never happened (a second call
// from the client that was lost).
func TestInterruptThatCancelledNothingIsReported(t *testing.T) {
	t.Parallel()
	c := legalConv()
	f := c.in.Runs["r1"]
	for i, e := range f.Events {
		if e.Type == "cancel_requested" {
			f.Events = append(f.Events[:i:i], f.Events[i+1:]...)
			break
		}
	}
	c.in.Runs["r1"] = f
	_, vs := c.check(t)
	require.Equal(t, []string{"interrupt"}, vs)
}

func TestReusedOrDecreasingVersionsAreReported(t *testing.T) {
	t.Parallel()
	c := newConv()
	c.run("r1", "reject", "", 0).claim(1, 10).save(1, 1, 1, 100, "", 0).save(3, 1, 2, 200, tag("r1", 1, 1), 1).
		save(2, 1, 3, 300, tag("r1", 1, 2), 3).finished(400)
	_, vs := c.check(t)
	require.Equal(t, []string{"ckpt_version"}, vs, "v2 accepted after v3")

	c = newConv()
	c.run("r1", "reject", "", 0).claim(1, 10).save(1, 1, 1, 100, "", 0).save(1, 1, 2, 200, tag("r1", 1, 1), 1).finished(400)
	_, vs = c.check(t)
	require.Contains(t, vs, "ckpt_version", "v1 accepted twice")
}

func TestCheckpointFromAStaleClaimIsReported(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(c *conv){
		"after its run ended": func(c *conv) { c.runs["r1"].save(8, 1, 5, 1050, tag("r1", 1, 4), 4) },
		"after a takeover": func(c *conv) {
			c.runs["r3"].claim(2, 1620).save(8, 1, 2, 1650, tag("r3", 1, 1), 7)
		},
		"another claim at the epoch": func(c *conv) {
			c.runs["r3"].saveAs(8, 1, 2, 1650, tag("r3", 1, 1), 7, "cX")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := legalConv()
			mutate(c)
			_, vs := c.check(t)
			require.Contains(t, vs, "ckpt_fence")
		})
	}
}

// The rolled-back run's checkpoints were not removed: the rollback run
// starts from them, and they are still there at the end.
func TestRollbackThatRemovedNothingIsReported(t *testing.T) {
	t.Parallel()
	c := newConv()
	c.run("r1", "reject", "", 0).claim(1, 10).save(1, 1, 1, 100, "", 0).finished(300)
	c.run("r2", "reject", "", 400).claim(1, 410).save(2, 1, 1, 500, tag("r1", 1, 1), 1).cancel(600).finished(700)
	c.run("r3", "rollback", "r2", 600).started(700).claim(1, 710).save(3, 1, 1, 800, tag("r2", 1, 1), 2).finished(900)
	c.final(1, 2, 3)
	r, vs := c.check(t)
	require.Equal(t, []string{"rollback", "rollback"}, vs)
	require.Equal(t, 1, r.Threads.Rollbacks)
}

// Issue 29's first case: r1 running, then a rollback rb and an interrupt
// int; int starts first, and must start on the state before r1.
func TestInterruptAheadOfARollbackStartsBeforeTheRolledBackRun(t *testing.T) {
	t.Parallel()
	c := newConv()
	c.run("r0", "reject", "", 0).claim(1, 10).save(1, 1, 1, 50, "", 0).finished(90)
	c.run("r1", "reject", "", 100).claim(1, 110).save(2, 1, 1, 200, tag("r0", 1, 1), 1).cancel(500).finished(1000)
	c.run("rb", "rollback", "r1", 500).started(2000).claim(1, 2010).save(4, 1, 1, 2100, tag("int", 1, 1), 3).finished(2200)
	c.run("int", "interrupt", "r1", 600).started(1000).claim(1, 1010).save(3, 1, 1, 1100, tag("r0", 1, 1), 1).finished(2000)
	c.final(1, 3, 4)
	_, vs := c.check(t)
	require.Empty(t, vs, "int started from r0's v1, rb from int's v3")

	c = newConv()
	c.run("r0", "reject", "", 0).claim(1, 10).save(1, 1, 1, 50, "", 0).finished(90)
	c.run("r1", "reject", "", 100).claim(1, 110).save(2, 1, 1, 200, tag("r0", 1, 1), 1).cancel(500).finished(1000)
	c.run("rb", "rollback", "r1", 500).started(2000).claim(1, 2010).save(4, 1, 1, 2100, tag("r0", 1, 1), 1).finished(2200)
	c.run("int", "interrupt", "r1", 600).started(1000).claim(1, 1010).save(3, 1, 1, 1100, tag("r1", 1, 1), 2).finished(2000)
	c.final(1, 2, 4)
	_, vs = c.check(t)
	require.ElementsMatch(t, []string{"rollback", "rollback", "rollback", "ckpt_lost"}, vs,
		"int started on r1's state, rb on r0's (int's removed), and r1's survives")
}

// A rollback withdrawn while queued removes nothing.
func TestWithdrawnRollbackRemovesNothing(t *testing.T) {
	t.Parallel()
	c := newConv()
	c.run("r1", "reject", "", 0).claim(1, 10).save(1, 1, 1, 100, "", 0).cancel(300).finished(400)
	c.run("rb", "rollback", "r1", 300).cancel(350).finished(350)
	c.run("r2", "enqueue", "r1", 320).started(400).claim(1, 410).save(2, 1, 1, 500, tag("r1", 1, 1), 1).finished(600)
	c.final(1, 2)
	r, vs := c.check(t)
	require.Empty(t, vs)
	require.Equal(t, 0, r.Threads.Rollbacks)
	require.Equal(t, 1, r.Threads.Withdrawn)
}

func TestInterruptedRunsLastCheckpointNotResumedIsReported(t *testing.T) {
	t.Parallel()
	c := legalConv()
	for i, s := range c.in.Threads.Checkpoints {
		if s.Version == 5 { // r2 resumes from v3, not r1's last (v4)
			st, _ := ParseStep(s.Data)
			st.From, st.FromV = tag("r1", 1, 3), 3
			c.in.Threads.Checkpoints[i].Data, _ = json.Marshal(st)
		}
	}
	_, vs := c.check(t)
	require.Equal(t, []string{"interrupt"}, vs)
}

// A takeover's attempt starts from an older checkpoint than the newest (an
// exec command whose from is resolved by its tag).
func TestAttemptThatSkippedTheNewestCheckpointIsReported(t *testing.T) {
	t.Parallel()
	c := newConv()
	c.run("r1", "reject", "", 0).claim(1, 10).save(1, 1, 1, 100, "", 0).save(2, 1, 2, 200, tag("r1", 1, 1), 0).
		claim(2, 2000).save(3, 2, 1, 2100, tag("r1", 1, 1), 0).finished(2200)
	c.final(1, 2, 3)
	_, vs := c.check(t)
	require.Equal(t, []string{"resume"}, vs)
}

func TestCheckpointGoneWithoutRollbackIsReported(t *testing.T) {
	t.Parallel()
	c := legalConv()
	c.final(1, 3, 4, 7) // v2 gone: nothing rolled r1 back, and the cap is 100
	_, vs := c.check(t)
	require.Equal(t, []string{"ckpt_lost"}, vs)
}

func TestBusyAnswerForAStoredRunIsReported(t *testing.T) {
	t.Parallel()
	c := legalConv()
	c.in.Threads.Submits = append(c.in.Threads.Submits, Submit{Run: "r1", Thread: "T", Strategy: "reject",
		Outcome: SubmitBusy, Err: "fence: thread busy"})
	_, vs := c.check(t)
	require.Equal(t, []string{"submit"}, vs)
}

// A rollback submitted in the same ms as its target ended: whether it had
// a target is not known, so the thread's later starts are not judged.
func TestSameMillisecondRollbackIsUndecided(t *testing.T) {
	t.Parallel()
	c := newConv()
	c.run("r1", "reject", "", 0).claim(1, 10).save(1, 1, 1, 100, "", 0).finished(300)
	c.run("rb", "rollback", "r1", 300).started(300).claim(1, 310).save(2, 1, 1, 400, tag("r1", 1, 1), 1).finished(500)
	c.final(1, 2)
	r, vs := c.check(t)
	require.Empty(t, vs)
	require.Equal(t, 1, r.Threads.Undecided)
}

// The same ms, but the target's cancel names the rollback run: it was
// cancelled by the rollback's submit, so it was RUNNING then.
func TestSameMillisecondRollbackNamedByTheCancelIsJudged(t *testing.T) {
	t.Parallel()
	c := newConv()
	c.run("r0", "reject", "", 0).claim(1, 10).save(1, 1, 1, 100, "", 0).finished(200)
	c.run("r1", "enqueue", "", 250).claim(1, 260).save(2, 1, 1, 280, tag("r0", 1, 1), 1).
		cancelBy(300, "rolled back by run rb").finished(300)
	c.run("rb", "rollback", "r1", 300).started(300).claim(1, 310).save(3, 1, 1, 400, tag("r1", 1, 1), 2).finished(500)
	c.final(1, 3)
	r, vs := c.check(t)
	require.Equal(t, []string{"rollback"}, vs, "rb started from r1's checkpoint")
	require.Equal(t, 0, r.Threads.Undecided)
	require.Equal(t, 1, r.Threads.Rollbacks)
}
