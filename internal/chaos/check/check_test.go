package check

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// t0 is the start of every hand-made history; ms(n) is n ms after it.
var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano()

func ms(n int64) int64 { return t0 + n*int64(time.Millisecond) }

// op builds one history line: worker's incarnation is worker+".1".
func op(worker, kind, node string, epoch int64, claim string, call, ret int64, outcome string) Op {
	return Op{Worker: worker, Op: kind, Thread: "run1", Run: "run1", Node: node, Epoch: epoch, Claim: claim,
		Call: ms(call), Ret: ms(ret), Outcome: outcome, Source: worker + ".1"}
}

func with(o Op, f func(*Op)) Op { f(&o); return o }

func refused(o Op, err string) Op { o.Outcome, o.Err = Refused, err; return o }

var bounds = Bounds{LeaseTTL: 1500 * time.Millisecond, Grace: 200 * time.Millisecond, Sweep: 200 * time.Millisecond}

func checks(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Check)
	}
	return out
}

// legalOps: a chain a -> b by continuation, a takeover of c with the paused
// owner's late commit refused, a commit whose reply was lost and whose retry
// was answered as a replay, and a claim retried after a lost reply.
func legalOps() []Op {
	return []Op{
		op("r1", "claim", "a", 1, "ca1", 0, 2, OK),
		op("r1", "heartbeat", "a", 1, "ca1", 300, 301, OK),
		with(op("r1", "commit", "a", 1, "ca1", 400, 402, OK), func(o *Op) { o.Next = &Next{Node: "b", Epoch: 1, Claim: "cb1"} }),
		op("r1", "heartbeat", "b", 1, "cb1", 600, 601, OK),
		op("r1", "commit", "b", 1, "cb1", 700, 3700, Unknown),
		with(op("r1", "commit", "b", 1, "cb1", 3800, 3801, OK), func(o *Op) { o.Replay = true }),

		op("r2", "claim", "c", 1, "cc1", 0, 1, OK),
		op("r2", "heartbeat", "c", 1, "cc1", 300, 301, OK),
		refused(op("r3", "claim", "c", 0, "cc2", 1000, 1001, Refused), "fence: node busy"),
		op("r3", "claim", "c", 2, "cc3", 2100, 2102, OK), // r2 paused: takeover
		refused(op("r2", "commit", "c", 1, "cc1", 2500, 2501, Refused), "fence: stale epoch"),
		refused(op("r2", "heartbeat", "c", 1, "cc1", 2500, 2501, Refused), "fence: stale epoch"),
		op("r3", "commit", "c", 2, "cc3", 2600, 2602, OK),
		refused(op("r1", "claim", "c", 0, "cc4", 2700, 2701, Refused), "fence: node done"),

		op("r1", "claim", "d", 0, "cd1", 0, 3000, Unknown),
		op("r1", "claim", "d", 1, "cd1", 3000, 3001, OK), // the retry recognised as the same claim
		with(op("r1", "fail", "d", 1, "cd1", 3100, 3101, OK), func(o *Op) { o.End = "retrying" }),
		op("r2", "claim", "d", 2, "cd2", 4200, 4201, OK),
		op("r2", "commit", "d", 2, "cd2", 4300, 4301, OK),
	}
}

// go-redis resends a command whose connection broke: one recorded commit
// call ran twice, and only the replay's answer arrived.
func TestReplayOfTheCallsOwnCommitPasses(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r1", "claim", "a", 1, "c1", 0, 1, OK),
		with(op("r1", "commit", "a", 1, "c1", 100, 300, OK), func(o *Op) { o.Replay = true }),
	}
	f := runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 1},
		ev("claimed", "a", 1, "r1", 0, nil), ev("committed", "a", 1, "r1", 150, nil))
	r := Check(Input{Ops: ops, Submitted: []string{"run1"}, Runs: map[string]RunFinal{"run1": f}, Bounds: bounds})
	require.Empty(t, r.Violations)
}

func TestLegalHistoryPasses(t *testing.T) {
	t.Parallel()
	r := Check(Input{Ops: legalOps(), Bounds: bounds})
	require.Empty(t, r.Violations)
	require.Equal(t, 4, r.Partitions)
	require.Equal(t, 19, r.Ops)
}

func TestIllegalHistoriesAreReported(t *testing.T) {
	t.Parallel()
	cases := map[string][]Op{
		"two accepted commits at different epochs": {
			op("r1", "claim", "a", 1, "c1", 0, 1, OK),
			op("r2", "claim", "a", 2, "c2", 2000, 2001, OK),
			op("r2", "commit", "a", 2, "c2", 2100, 2101, OK),
			op("r1", "commit", "a", 1, "c1", 2200, 2201, OK),
		},
		"commit accepted with a stale epoch": {
			op("r1", "claim", "a", 1, "c1", 0, 1, OK),
			op("r2", "claim", "a", 2, "c2", 2000, 2001, OK),
			op("r1", "commit", "a", 1, "c1", 2100, 2101, OK),
		},
		"claim skips an epoch": {
			op("r1", "claim", "a", 1, "c1", 0, 1, OK),
			op("r2", "claim", "a", 3, "c2", 2000, 2001, OK),
		},
		"heartbeat accepted for another claim id": {
			op("r1", "claim", "a", 1, "c1", 0, 1, OK),
			op("r2", "heartbeat", "a", 1, "c9", 100, 101, OK),
		},
		"commit answered not replay twice": {
			op("r1", "claim", "a", 1, "c1", 0, 1, OK),
			op("r1", "commit", "a", 1, "c1", 100, 101, OK),
			op("r1", "commit", "a", 1, "c1", 200, 201, OK),
		},
		"claim after a terminal state": {
			op("r1", "claim", "a", 1, "c1", 0, 1, OK),
			with(op("r1", "fail", "a", 1, "c1", 100, 101, OK), func(o *Op) { o.End = "failed" }),
			op("r2", "claim", "a", 2, "c2", 200, 201, OK),
		},
		"current write refused as stale": {
			op("r1", "claim", "a", 1, "c1", 0, 1, OK),
			refused(op("r1", "commit", "a", 1, "c1", 100, 101, Refused), "fence: stale epoch"),
		},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			r := Check(Input{Ops: ops, Bounds: bounds, OutDir: dir})
			require.Equal(t, []string{"linearizable"}, checks(r.Violations), "%v", r.Violations)
			require.Contains(t, r.Violations[0].Msg, "visualisation")
			html, err := filepath.Glob(filepath.Join(dir, "porcupine-*.html"))
			require.NoError(t, err)
			require.Len(t, html, 1)
		})
	}
}

// A killed runner loses the line of the claim it had in flight: the gap in
// epochs is explained by the kill, and only by it.
func TestPhantomOnlyForKilledIncarnations(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r1", "claim", "a", 1, "c1", 0, 1, OK),
		with(op("r1", "fail", "a", 1, "c1", 100, 101, OK), func(o *Op) { o.End = "retrying" }),
		// r1 claims epoch 2 here, is killed, and its line is lost.
		op("r2", "claim", "a", 3, "c3", 3000, 3001, OK),
		op("r2", "commit", "a", 3, "c3", 3100, 3101, OK),
	}
	r := Check(Input{Ops: ops, Bounds: bounds})
	require.Equal(t, []string{"linearizable"}, checks(r.Violations))

	kill := Fault{Kind: KindKill, Target: "r1", Source: "r1.1", Start: ms(1000), End: ms(1000)}
	r = Check(Input{Ops: ops, Bounds: bounds, Faults: []Fault{kill}})
	require.Empty(t, r.Violations)
	require.Equal(t, 1, r.Phantoms)
}

// Seen in a fault run: r2 committed d, the commit claimed e for it as a
// continuation, and r2 was killed before it wrote either line. e shows up
// in the histories only when r3 takes it over at epoch 2, two seconds later.
func TestPhantomContinuationBeforeTheNodesFirstLine(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r3", "claim", "e", 2, "ce2", 3800, 3801, OK),
		op("r3", "commit", "e", 2, "ce2", 3802, 3803, OK),
	}
	kill := Fault{Kind: KindKill, Target: "r2", Source: "r2.1", Start: ms(2000), End: ms(2600)}
	r := Check(Input{Ops: ops, Bounds: bounds, Faults: []Fault{kill}})
	require.Empty(t, r.Violations)
	kill.Start = ms(3900) // killed after the takeover: cannot explain it
	r = Check(Input{Ops: ops, Bounds: bounds, Faults: []Fault{kill}})
	require.Equal(t, []string{"linearizable"}, checks(r.Violations))
}

// runFinal builds a run read back from Redis with one node.
func runFinal(node fence.NodeInfo, events ...fence.Event) RunFinal {
	return RunFinal{Info: &fence.RunInfo{ID: "run1", Status: node.State, Nodes: []fence.NodeInfo{node}}, Events: events}
}

func ev(typ, node string, epoch int64, worker string, at int64, details map[string]string) fence.Event {
	return fence.Event{Type: typ, Node: node, Epoch: epoch, Worker: worker, At: time.Unix(0, ms(at)), Details: details}
}

func TestTwoCommitsInRedisAreReported(t *testing.T) {
	t.Parallel()
	f := runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 2},
		ev("claimed", "a", 1, "r1", 0, nil), ev("takeover", "a", 2, "r2", 2000, nil),
		ev("committed", "a", 2, "r2", 2100, nil), ev("committed", "a", 1, "r1", 2200, nil))
	r := Check(Input{Submitted: []string{"run1"}, Runs: map[string]RunFinal{"run1": f}, Bounds: bounds})
	require.Equal(t, []string{"commits"}, checks(r.Violations))
}

func TestLostAndOpenRunsAreReported(t *testing.T) {
	t.Parallel()
	open := runFinal(fence.NodeInfo{ID: "a", State: "RUNNING", Epoch: 1, Owner: "r1"})
	r := Check(Input{Submitted: []string{"run1", "run2"}, Runs: map[string]RunFinal{"run1": open}, Bounds: bounds})
	require.ElementsMatch(t, []string{"terminal", "lost_run"}, checks(r.Violations))
}

// An orphaned claim (its reply lost, the caller gone on without it) burns
// the only attempt: FAILED with no attempts left, and no process fault
// explains it.
func TestOrphanedClaimFailingANodeIsReported(t *testing.T) {
	t.Parallel()
	node := fence.NodeInfo{ID: "a", State: "FAILED", Epoch: 1, Attempt: 1, MaxAttempts: 1,
		Error: "lease of r1 expired at attempt 1: no attempts left"}
	f := runFinal(node, ev("claimed", "a", 1, "r1", 0, nil),
		ev("failed", "a", 1, "r2", 2000, map[string]string{"error": node.Error, "final": "1"}))
	lost := Fault{Kind: KindLostReply, Target: "r1", Start: ms(-10), End: ms(400)}
	r := Check(Input{Submitted: []string{"run1"}, Runs: map[string]RunFinal{"run1": f}, Faults: []Fault{lost}, Bounds: bounds})
	require.Equal(t, []string{"attempts"}, checks(r.Violations))
	require.Contains(t, r.Violations[0].Msg, "proxy_lost_reply r1")

	stop := Fault{Kind: KindStop, Target: "r1", Start: ms(100), End: ms(2500)}
	r = Check(Input{Submitted: []string{"run1"}, Runs: map[string]RunFinal{"run1": f}, Faults: []Fault{lost, stop}, Bounds: bounds})
	require.Empty(t, r.Violations)
}

func TestSlowTakeoverIsReportedUnlessRedisWasDown(t *testing.T) {
	t.Parallel()
	until := time.Unix(0, ms(1500)).UnixMilli() // renewed at 0
	f := runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 2},
		ev("claimed", "a", 1, "r1", 0, nil),
		ev("heartbeat_lost", "a", 1, "r1", 9000, map[string]string{"lease_until": itoa(until)}),
		ev("takeover", "a", 2, "r2", 9000, nil), ev("committed", "a", 2, "r2", 9100, nil))
	in := Input{Submitted: []string{"run1"}, Runs: map[string]RunFinal{"run1": f}, Bounds: bounds}
	r := Check(in)
	require.Equal(t, []string{"takeover"}, checks(r.Violations))
	require.Equal(t, 9*time.Second, r.MaxTakeover)

	in.Faults = []Fault{{Kind: KindRedisKill, Target: "redis", Start: ms(500), End: ms(6500)}}
	r = Check(in)
	require.Empty(t, r.Violations)
	require.Equal(t, 1, r.Takeovers)
	require.Equal(t, 2*time.Second, r.MaxTakeover)
}

func TestOlderTokenAdmittedAfterNewerIsReported(t *testing.T) {
	t.Parallel()
	admits := []Admit{
		{Resource: "run1/a", Run: "run1", Node: "a", Epoch: 1, Claim: "c1", Admitted: true, Start: ms(0), At: ms(1)},
		{Resource: "run1/a", Run: "run1", Node: "a", Epoch: 2, Claim: "c2", Admitted: true, Start: ms(10), At: ms(11)},
		{Resource: "run1/a", Run: "run1", Node: "a", Epoch: 1, Claim: "c1", Admitted: false, Start: ms(20), At: ms(21)},
	}
	r := Check(Input{Admits: admits, Bounds: bounds})
	require.Empty(t, r.Violations)

	admits = append(admits, Admit{Resource: "run1/a", Token: "run1/a@1/c1", Epoch: 1, Claim: "c1", Admitted: true,
		Start: ms(30), At: ms(31)})
	r = Check(Input{Admits: admits, Bounds: bounds})
	require.Equal(t, []string{"admit"}, checks(r.Violations))
}

func TestReadHistorySkipsATornLastLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "r1.2.jsonl")
	good := `{"worker":"r1","op":"claim","thread":"t","run":"r","node":"n","epoch":3,"attempt":2,"claim":"x",` +
		`"call":100,"ret":200,"outcome":"ok","replay":false,"next":{"node":"n2","epoch":1,"claim":"y"}}`
	require.NoError(t, os.WriteFile(path, []byte(good+"\n"+good[:40]), 0o644))
	ops, err := ReadHistory(path, "")
	require.NoError(t, err)
	require.Len(t, ops, 1)
	require.Equal(t, "r1.2", ops[0].Source)
	require.Equal(t, &Next{Node: "n2", Epoch: 1, Claim: "y"}, ops[0].Next)

	require.NoError(t, os.WriteFile(path, []byte(good[:40]+"\n"+good+"\n"), 0o644))
	_, err = ReadHistory(path, "")
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "r1.2.jsonl:1"), err.Error())
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A commit whose every try lost its reply may have been applied: a node
// SUCCEEDED at that epoch is explained. With no commit call at all it is not.
func TestUnheardCommitExplainsASucceededNode(t *testing.T) {
	t.Parallel()
	final := runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 1, Owner: "r1"},
		ev("claimed", "a", 1, "r1", 0, nil), ev("committed", "a", 1, "r1", 150, nil))
	claim := op("r1", "claim", "a", 1, "c1", 0, 1, OK)
	for _, tc := range []struct {
		name string
		ops  []Op
		want []string
	}{
		{"every reply lost", []Op{claim, op("r1", "commit", "a", 1, "c1", 100, 300, Unknown),
			op("r1", "commit", "a", 1, "c1", 350, 600, Unknown)}, nil},
		{"no commit call", []Op{claim, op("r1", "heartbeat", "a", 1, "c1", 100, 101, OK)}, []string{"history"}},
	} {
		r := Check(Input{Ops: tc.ops, Submitted: []string{"run1"}, Runs: map[string]RunFinal{"run1": final}, Bounds: bounds})
		require.Equal(t, tc.want, checks(r.Violations), tc.name)
	}
}

// A commit whose first tries lost their replies claimed its continuation
// during one of them; the replay only reports it. Another worker's claim of
// the continuation, refused as busy between the tries and the replay, is
// legal.
func TestReplayedContinuationWasClaimedByAnEarlierTry(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r1", "claim", "a", 1, "ca", 0, 1, OK),
		op("r1", "commit", "a", 1, "ca", 100, 200, Unknown),
		refused(op("r2", "claim", "b", 0, "cx", 250, 251, Refused), "fence: node busy"),
		with(op("r1", "commit", "a", 1, "ca", 300, 301, OK), func(o *Op) {
			o.Replay, o.Next = true, &Next{Node: "b", Epoch: 1, Claim: "cb"}
		}),
		op("r1", "commit", "b", 1, "cb", 400, 401, OK),
	}
	r := Check(Input{Ops: ops, Bounds: bounds})
	require.Empty(t, r.Violations)
}

// A commit whose reply was lost claimed its continuation; its holder died
// without hearing of it. The lease runs out, the next claim finds the
// attempts exhausted, and the expire names the hidden claim it read from
// the node: legal.
func TestExpireOfAHiddenContinuation(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r1", "claim", "a", 1, "ca", 0, 1, OK),
		op("r1", "commit", "a", 1, "ca", 100, 200, Unknown),
		refused(op("r2", "claim", "b", 0, "cx", 2500, 2501, Refused), "fence: attempts exhausted"),
		with(op("r2", "expire", "b", 1, "cb-hidden", 2501, 2502, OK), func(o *Op) { o.End = "failed" }),
	}
	deps := map[string]map[string][]string{"run1": {"a": {"b"}}}
	r := Check(Input{Ops: ops, Dependents: deps, Bounds: bounds})
	require.Empty(t, r.Violations)

	// Without a commit that could have claimed it, the same expire is not.
	r = Check(Input{Ops: ops[2:], Dependents: deps, Bounds: bounds})
	require.Equal(t, []string{"linearizable"}, checks(r.Violations))
}

// Two concurrent expires of one expired lease (a duplicate delivery) both
// answer ok: the second is recognised as the first's retry.
func TestConcurrentExpiresOfOneLease(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r1", "claim", "a", 1, "ca", 0, 1, OK),
		refused(op("r2", "claim", "a", 0, "cx", 2500, 2501, Refused), "fence: attempts exhausted"),
		refused(op("r2", "claim", "a", 0, "cy", 2500, 2501, Refused), "fence: attempts exhausted"),
		with(op("r2", "expire", "a", 1, "ca", 2502, 2504, OK), func(o *Op) { o.End = "failed" }),
		with(op("r2", "expire", "a", 1, "ca", 2502, 2505, OK), func(o *Op) { o.End = "failed" }),
	}
	r := Check(Input{Ops: ops, Bounds: bounds})
	require.Empty(t, r.Violations)
}

// A claim whose connection broke is sent again by go-redis: Redis ran the
// first send (epoch 1), the node was taken over and finished, and the
// resend's "node done" is all the caller heard. Legal; and the epochs that
// follow must still grow by one.
func TestRefusedClaimMayHaveRunBefore(t *testing.T) {
	t.Parallel()
	ops := []Op{
		refused(op("r1", "claim", "a", 0, "c1", 0, 2500, Refused), "fence: node done"),
		op("r2", "claim", "a", 2, "c2", 1800, 1801, OK),
		op("r2", "commit", "a", 2, "c2", 1900, 1901, OK),
	}
	require.Empty(t, Check(Input{Ops: ops, Bounds: bounds}).Violations)
	ops[1].Epoch, ops[2].Epoch = 3, 3
	require.Equal(t, []string{"linearizable"}, checks(Check(Input{Ops: ops, Bounds: bounds}).Violations))
}

// A commit whose reply was lost may have taken a node of another run of
// its shard from the queue (fence.Continue.Take), unheard of: the node's
// first recorded claim, a takeover at epoch 2 long after (every slot was
// full), is explained by it. A commit of another shard explains nothing.
func TestACommitWithoutAReplyMayHaveTakenANode(t *testing.T) {
	t.Parallel()
	other := func(shard int) string {
		for i := 0; ; i++ {
			id := "run" + strconv.Itoa(i+2)
			if (fence.ShardOf(id) == fence.ShardOf("run1")) == (shard == 0) {
				return id
			}
		}
	}
	for _, tc := range []struct {
		name  string
		run   string
		wants []string
	}{{"same shard", other(0), nil}, {"another shard", other(1), []string{"linearizable"}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			taken := func(o Op) Op { o.Thread, o.Run = tc.run, tc.run; return o }
			ops := []Op{
				op("r1", "claim", "a", 1, "ca1", 0, 1, OK),
				op("r1", "commit", "a", 1, "ca1", 100, 400, Unknown),
				with(op("r1", "commit", "a", 1, "ca1", 500, 501, OK), func(o *Op) { o.Replay = true }),
				taken(op("r2", "claim", "root", 2, "cr2", 25000, 25001, OK)),
				taken(op("r2", "commit", "root", 2, "cr2", 25100, 25101, OK)),
			}
			r := Check(Input{Ops: ops, Bounds: bounds})
			require.Equal(t, tc.wants, checks(r.Violations), "%v", r.Violations)
		})
	}
}
