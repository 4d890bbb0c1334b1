package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// slotRun is seed 2's takeover in small: r3, holding a, is stopped at 100
// ms after its last renewal at 0; r1 and r2 each have one slot, held by x
// and y; r2 takes a over at 3.4 s, past the 2.9 s bound. xEnds and yEnds
// are when x's and y's commits are sent.
func slotRun(xEnds, yEnds int64) Input {
	until := time.Unix(0, ms(1500)).UnixMilli()
	f := RunFinal{Info: &fence.RunInfo{ID: "run1", Status: "SUCCEEDED", Nodes: []fence.NodeInfo{
		{ID: "a", State: "SUCCEEDED", Epoch: 2}, {ID: "x", State: "SUCCEEDED", Epoch: 1},
		{ID: "y", State: "SUCCEEDED", Epoch: 1}}},
		Events: []fence.Event{ev("claimed", "a", 1, "r3", 0, nil),
			ev("heartbeat_lost", "a", 1, "r3", 3400, map[string]string{"lease_until": itoa(until)}),
			ev("takeover", "a", 2, "r2", 3400, nil), ev("committed", "a", 2, "r2", 3500, nil)}}
	ops := []Op{
		op("r3", "claim", "a", 1, "ca1", -10, -5, OK),
		op("r1", "claim", "x", 1, "cx1", 1000, 1001, OK),
		op("r2", "claim", "y", 1, "cy1", 1000, 1001, OK),
		op("r1", "commit", "x", 1, "cx1", xEnds, xEnds+1, OK),
		op("r2", "commit", "y", 1, "cy1", yEnds, yEnds+1, OK),
		op("r2", "claim", "a", 2, "ca2", 3399, 3400, OK),
		op("r2", "commit", "a", 2, "ca2", 3499, 3500, OK),
	}
	return Input{Ops: ops, Runs: map[string]RunFinal{"run1": f}, Bounds: bounds,
		Faults: []Fault{{Kind: KindStop, Target: "r3", Source: "r3.1", Start: ms(100), End: ms(5000)}},
		Workers: []Worker{{ID: "r1", Queues: []string{"default"}, Concurrency: 1},
			{ID: "r2", Queues: []string{"default"}, Concurrency: 1},
			{ID: "r3", Queues: []string{"default"}, Concurrency: 1}}}
}

// A takeover that waited for a slot while every live worker of its queue
// was full is within the bound: the wait is the fleet's capacity, not
// delivery.
func TestTakeoverWaitingForAFreeSlotIsNotSlow(t *testing.T) {
	t.Parallel()
	r := Check(slotRun(3300, 3390))
	require.Empty(t, r.Violations)
	require.Equal(t, 1, r.Takeovers)
	// Full from 1.9 s (due 1.7 s, handed out by 1.9 s) until x's commit at
	// 3.3 s: 3.4 s - 1.4 s.
	require.Equal(t, 2*time.Second, r.MaxTakeover)
}

// The same delay beside a free slot is a slow takeover: r1 was free from
// 2 s, and nothing took the node for 1.4 s more.
func TestTakeoverBesideAFreeSlotIsSlow(t *testing.T) {
	t.Parallel()
	r := Check(slotRun(2000, 3390))
	require.Equal(t, []string{"takeover"}, checks(r.Violations))
	require.Contains(t, r.Violations[0].Msg, "100ms of it no free slot")
	require.Equal(t, 3300*time.Millisecond, r.MaxTakeover)

	// Without the fleet's slots the checker assumes one was always free.
	in := slotRun(3300, 3390)
	in.Workers = nil
	r = Check(in)
	require.Equal(t, []string{"takeover"}, checks(r.Violations))
}

// A worker that is down counts as full; one serving another queue does
// not count at all.
func TestTakeoverSlotsFollowQueuesAndFaults(t *testing.T) {
	t.Parallel()
	in := slotRun(2000, 3390)
	in.Faults = append(in.Faults, Fault{Kind: KindBlackhole, Target: "r1", Start: ms(1900), End: ms(2400)})
	r := Check(in) // r1 cut off until 3.4 s with the reconnect's tail
	require.Empty(t, r.Violations)

	in = slotRun(2000, 3390)
	in.Workers[0].Queues = []string{"agents"}
	r = Check(in) // r1 never serves a's queue: r2 alone was full
	require.Empty(t, r.Violations)
}
