package check

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// flowIn builds a hand-made history of nodes naming limits: one run per
// node ("run-a" holds node "n"), each node naming the limits given, with
// the events added by ev. Times are ms after t0.
type flowIn struct{ in Input }

func newFlow(limits ...FlowLimit) *flowIn {
	return &flowIn{in: Input{Runs: map[string]RunFinal{}, Flow: &FlowInput{Limits: limits, Uses: map[string][]string{}}}}
}

func (f *flowIn) node(run string, state string, result string, limits ...string) {
	f.in.Flow.Uses[run+"/n"] = limits
	f.in.Runs[run] = RunFinal{Info: &fence.RunInfo{ID: run, Status: "SUCCEEDED",
		Nodes: []fence.NodeInfo{{ID: "n", State: state, Result: json.RawMessage(result)}}}}
}

func (f *flowIn) ev(run, typ string, epoch, at int64, d map[string]string) *flowIn {
	r := f.in.Runs[run]
	r.Events = append(r.Events, ev(typ, "n", epoch, "w", at, d))
	f.in.Runs[run] = r
	return f
}

func (f *flowIn) check() Report {
	var r Report
	r.Violations = append(checkLimits(f.in, &r), checkWaits(f.in, &r)...)
	return r
}

var one = FlowLimit{Name: "one", Concurrency: 1}

// Two nodes running at once under a concurrency of 1 are a violation,
// whoever claimed first.
func TestTwoHoldersUnderALimitOfOneAreReported(t *testing.T) {
	t.Parallel()
	f := newFlow(one)
	f.node("a", "SUCCEEDED", "null", "one")
	f.node("b", "SUCCEEDED", "null", "one")
	f.ev("a", "claimed", 1, 0, nil).ev("a", "committed", 1, 500, nil)
	f.ev("b", "claimed", 1, 400, nil).ev("b", "committed", 1, 900, nil)
	r := f.check()
	require.Equal(t, []string{"limit_held"}, checks(r.Violations))
	require.Contains(t, r.Violations[0].Msg, "a/n (claimed e1")
	require.Equal(t, 2, r.Flow.MaxHeld["one"])
}

// A slot handed on (an end, then a claim in the same millisecond), a
// takeover that moves the slot, a park that frees it and a retried
// attempt's claim are one holder at a time.
func TestHandedOnSlotsAreOneHolder(t *testing.T) {
	t.Parallel()
	f := newFlow(one)
	f.node("a", "SUCCEEDED", "null", "one")
	f.node("b", "SUCCEEDED", "null", "one")
	f.node("c", "SUCCEEDED", "null", "one")
	f.ev("a", "claimed", 1, 0, nil).ev("a", "takeover", 2, 2000, nil).ev("a", "committed", 2, 2300, nil)
	f.ev("b", "claimed", 1, 2300, nil).ev("b", "parked", 1, 2400, map[string]string{"wait_id": "w1"})
	f.ev("c", "claimed", 1, 2400, nil).ev("c", "failed", 1, 2600, map[string]string{"final": "0"}).
		ev("c", "claimed", 2, 2700, nil).ev("c", "released", 2, 2800, nil).
		ev("c", "claimed", 3, 2900, nil).ev("c", "cancelled", 3, 3000, nil)
	f.ev("b", "claimed", 2, 3000, nil).ev("b", "committed", 2, 3100, nil)
	r := f.check()
	require.Empty(t, checks(r.Violations))
	require.Equal(t, 1, r.Flow.MaxHeld["one"])
	require.Equal(t, 7, r.Flow.Claims["one"])
}

// A node that never ended its attempt still holds its slot (a single
// server keeps it until a takeover): a second holder is reported.
func TestAnUnendedHolderStillHolds(t *testing.T) {
	t.Parallel()
	three := FlowLimit{Name: "three", Concurrency: 3}
	f := newFlow(three)
	for i, run := range []string{"a", "b", "c", "d"} {
		f.node(run, "SUCCEEDED", "null", "three")
		f.ev(run, "claimed", 1, int64(i*100), nil)
	}
	f.ev("a", "heartbeat_lost", 1, 350, nil)
	r := f.check()
	require.Equal(t, []string{"limit_held"}, checks(r.Violations))
	require.Contains(t, r.Violations[0].Msg, "held by 4")
}

// A rate of 4 a second with a burst of 2 admits 6 claims in a second,
// never 7.
func TestRateOverItsBoundIsReported(t *testing.T) {
	t.Parallel()
	rate := FlowLimit{Name: "rate", Rate: 4, PeriodMS: 1000, Burst: 2}
	run := func(times ...int64) Report {
		f := newFlow(rate)
		for i, at := range times {
			id := fmt.Sprintf("r%d", i)
			f.node(id, "SUCCEEDED", "null", "rate")
			f.ev(id, "claimed", 1, at, nil).ev(id, "committed", 1, at+1, nil)
		}
		return f.check()
	}
	// GCRA's densest: 3 at once, then one every 250 ms.
	require.Empty(t, checks(run(0, 0, 0, 250, 500, 750, 1000, 1250).Violations))
	require.Equal(t, []string{"limit_rate"}, checks(run(0, 0, 0, 250, 500, 750, 999).Violations))
}

// parkedNode is a node that parked on wait w1 at 100 and was resumed.
func parkedNode(result string, resumes int) *flowIn {
	f := newFlow()
	f.node("a", "SUCCEEDED", result)
	f.in.Flow.Parks = []string{"a/n"}
	f.ev("a", "claimed", 1, 0, nil).ev("a", "parked", 1, 100, map[string]string{"wait_id": "w1"})
	for i := range resumes {
		f.ev("a", "resumed", 0, int64(200+i*10), map[string]string{"wait_id": "w1"})
	}
	f.ev("a", "claimed", 2, 300, nil).ev("a", "committed", 2, 400, nil)
	return f
}

func answered(wait, why, value string, replay bool) ResumeOp {
	return ResumeOp{Run: "a", Node: "n", Wait: wait, Sent: json.RawMessage(value), Why: why, Outcome: ResumeAnswered,
		Answer: json.RawMessage(value), Replay: replay}
}

// A wait answered once, its resume retried and a second answer given the
// first back, is one answer, read by the next attempt.
func TestAWaitAnsweredOnceIsNotReported(t *testing.T) {
	t.Parallel()
	f := parkedNode(`{"answer":{"v":1},"wait":"w1"}`, 1)
	f.in.Flow.Resumes = []ResumeOp{answered("w1", "first", `{"v":1}`, false), answered("w1", "retry", `{"v": 1}`, true),
		answered("w1", "second", `{"v":1}`, true)}
	r := f.check()
	require.Empty(t, checks(r.Violations))
	require.Equal(t, 1, r.Flow.Parks)
	require.Equal(t, 1, r.Flow.Resumed)
	require.Equal(t, 2, r.Flow.Replays)
}

// A wait that Redis resumed twice, or whose second answer was taken as a
// first, is reported.
func TestAWaitAnsweredTwiceIsReported(t *testing.T) {
	t.Parallel()
	f := parkedNode(`{"answer":{"v":1},"wait":"w1"}`, 2)
	f.in.Flow.Resumes = []ResumeOp{answered("w1", "first", `{"v":1}`, false)}
	require.Equal(t, []string{"wait_answer"}, checks(f.check().Violations))

	f = parkedNode(`{"answer":{"v":1},"wait":"w1"}`, 1)
	f.in.Flow.Resumes = []ResumeOp{answered("w1", "first", `{"v":1}`, false), answered("w1", "second", `{"v":2}`, false)}
	require.Equal(t, []string{"wait_answer", "wait_answer"}, checks(f.check().Violations))
}

// A resend refused ("node not waiting") breaks the promise of the first
// answer again.
func TestARefusedResendIsReported(t *testing.T) {
	t.Parallel()
	f := parkedNode(`{"answer":{"v":1},"wait":"w1"}`, 1)
	f.in.Flow.Resumes = []ResumeOp{answered("w1", "first", `{"v":1}`, false),
		{Run: "a", Node: "n", Wait: "w1", Why: "second", Outcome: ResumeRefused, Err: "fence: node not waiting"}}
	require.Equal(t, []string{"wait_answer"}, checks(f.check().Violations))
}

// The attempt after the resume must read its answer: a result without it,
// with another value, or a second park after an answered wait is
// reported.
func TestAnAnswerNotConsumedIsReported(t *testing.T) {
	t.Parallel()
	for _, result := range []string{`{"node":"n"}`, `{"answer":{"v":2},"wait":"w1"}`} {
		f := parkedNode(result, 1)
		f.in.Flow.Resumes = []ResumeOp{answered("w1", "first", `{"v":1}`, false)}
		require.Equal(t, []string{"wait_value"}, checks(f.check().Violations), result)
	}
	f := parkedNode(`{"answer":{"v":1},"wait":"w2"}`, 1)
	f.ev("a", "parked", 2, 450, map[string]string{"wait_id": "w2"}).
		ev("a", "resumed", 0, 500, map[string]string{"wait_id": "w2"})
	f.in.Flow.Resumes = []ResumeOp{answered("w1", "first", `{"v":1}`, false), answered("w2", "first", `{"v":1}`, false)}
	require.Equal(t, []string{"wait_value"}, checks(f.check().Violations))
}

// Lowering a limit takes no slot away, but a claim after it must fit the
// new limit (issue 42: three running under a concurrency of 1 after the
// operator lowered it from 3); after raising it again, three may run.
func TestAClaimOverALoweredLimitIsReported(t *testing.T) {
	t.Parallel()
	three := FlowLimit{Name: "three", Concurrency: 3}
	build := func(aEnds, lateClaim int64) Report {
		f := newFlow(three)
		f.in.Flow.Changes = []LimitSet{{Name: "three", Concurrency: 1, Call: ms(1000), Ret: ms(1010)},
			{Name: "three", Concurrency: 3, Call: ms(5000), Ret: ms(5010)}}
		for i, run := range []string{"a", "b", "c"} {
			f.node(run, "SUCCEEDED", "null", "three")
			f.ev(run, "claimed", 1, int64(i*100), nil) // 3 held before the change
		}
		f.ev("a", "committed", 1, aEnds, nil)
		f.node("d", "SUCCEEDED", "null", "three")
		f.ev("d", "claimed", 1, lateClaim, nil).ev("d", "committed", 1, lateClaim+100, nil)
		return f.check()
	}
	r := build(2000, 2500) // 3 held under a limit of 1
	require.Equal(t, []string{"limit_held"}, checks(r.Violations))
	require.Contains(t, r.Violations[0].Msg, "concurrency 1) held by 3")
	require.Empty(t, checks(build(2000, 5100).Violations)) // raised back to 3
	require.Empty(t, checks(build(950, 1005).Violations))  // while the change was made: either limit
}

// A slot still held at the end, with every run naming the limit ended, is
// a slot lost (issue 42: a claim replayed after a lost reply came back
// with no limits, and its end freed nothing); one held by an open run is
// not.
func TestASlotHeldAtTheEndIsReported(t *testing.T) {
	t.Parallel()
	f := newFlow(one)
	f.node("a", "SUCCEEDED", "null", "one")
	f.ev("a", "claimed", 1, 0, nil).ev("a", "committed", 1, 100, nil)
	f.in.Flow.End = []LimitEnd{{Name: "one", InUse: 1}}
	require.Equal(t, []string{"limit_leak"}, checks(f.check().Violations))
	f.in.Runs["a"].Info.Status = "RUNNING"
	require.Empty(t, checks(f.check().Violations))
}

// A takeover of a node naming a rate can wait for the rate: its claim is
// refused "not due" while the expired owner's lease is still RUNNING. A
// node naming no rate has no such refusal (chaos seed 11, chaos-11-f068/r1).
func TestATakeoverWaitingForItsRateIsLinearizable(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r3", "claim", "a", 1, "c1", 0, 1, OK),
		refused(op("r1", "claim", "a", 0, "c2", 2000, 2001, Refused), "fence: node not due"),
		op("r1", "claim", "a", 2, "c3", 2050, 2051, OK),
		op("r1", "commit", "a", 2, "c3", 2100, 2101, OK),
	}
	runs := map[string]RunFinal{"run1": runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 2},
		ev("claimed", "a", 1, "r3", 0, nil), ev("takeover", "a", 2, "r1", 2050, nil), ev("committed", "a", 2, "r1", 2100, nil))}
	in := Input{Ops: ops, Submitted: []string{"run1"}, Runs: runs, Bounds: bounds}
	require.Equal(t, []string{"linearizable"}, checks(Check(in).Violations))
	in.Flow = &FlowInput{Limits: []FlowLimit{{Name: "rate", Rate: 4, PeriodMS: 1000}}, Uses: map[string][]string{"run1/a": {"rate"}}}
	require.Empty(t, checks(Check(in).Violations))
}

// A park is in no history (the runners record claim, heartbeat, commit,
// fail, release, expire): the parked event ends the claim of its epoch for
// the register model, so the owner's heartbeat refused "not running" after
// it, and the claim after the resume, fit (chaos seed 25,
// chaos-25-f107/ask).
func TestAParkedEventEndsTheClaimForTheModel(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r3", "claim", "a", 1, "c1", 0, 1, OK),
		refused(op("r3", "heartbeat", "a", 1, "c1", 300, 301, Refused), "fence: node not running"),
		op("r1", "claim", "a", 2, "c2", 900, 901, OK),
		op("r1", "commit", "a", 2, "c2", 1000, 1001, OK),
	}
	events := []fence.Event{ev("claimed", "a", 1, "r3", 0, nil), ev("resumed", "a", 0, "client", 800, nil),
		ev("claimed", "a", 2, "r1", 900, nil), ev("committed", "a", 2, "r1", 1000, nil)}
	in := Input{Ops: ops, Submitted: []string{"run1"}, Bounds: bounds,
		Runs: map[string]RunFinal{"run1": runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 2}, events...)}}
	require.Equal(t, []string{"linearizable"}, checks(Check(in).Violations))
	parked := append([]fence.Event{events[0], ev("parked", "a", 1, "r3", 200, map[string]string{"wait_id": "w1"})}, events[1:]...)
	in.Runs = map[string]RunFinal{"run1": runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 2}, parked...)}
	require.Empty(t, checks(Check(in).Violations))
}
