package check

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// linearizable runs the whole check and reports whether the histories
// were found linearizable.
func linearizable(t *testing.T, ops []Op, f RunFinal) bool {
	t.Helper()
	r := Check(Input{Ops: ops, Submitted: []string{"run1"}, Runs: map[string]RunFinal{"run1": f}, Bounds: bounds})
	for _, v := range r.Violations {
		t.Log(v)
	}
	return !slices.Contains(checks(r.Violations), "linearizable")
}

// A run cancelled while its node waited READY (released by its owner): the
// cancel, no runner's call, ended it, and the next claim finds it done.
func TestRunCancelEndsAReadyNode(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r2", "claim", "a", 1, "c1", 0, 1, OK),
		with(op("r2", "release", "a", 1, "c1", 2000, 2001, OK), func(o *Op) { o.End = "retrying" }),
		refused(op("r1", "claim", "a", 0, "c2", 2100, 2101, Refused), "fence: node done"),
	}
	node := fence.NodeInfo{ID: "a", State: "CANCELLED", Epoch: 1}
	cancelled := runFinal(node, ev("claimed", "a", 1, "r2", 0, nil), ev("released", "a", 1, "r2", 2000, nil),
		ev("cancel_requested", "", 0, "client", 2050, nil), ev("cancelled", "a", 0, "client", 2050, nil))
	require.True(t, linearizable(t, ops, cancelled))
	require.False(t, linearizable(t, ops, runFinal(node)), "without the cancel nothing ends a READY node")
}

// Once the cancel ended a READY node, no claim may succeed.
func TestClaimAfterTheRunsCancelIsReported(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r2", "claim", "a", 1, "c1", 0, 1, OK),
		with(op("r2", "release", "a", 1, "c1", 100, 101, OK), func(o *Op) { o.End = "retrying" }),
		op("r1", "claim", "a", 2, "c2", 300, 301, OK),
	}
	f := runFinal(fence.NodeInfo{ID: "a", State: "RUNNING", Epoch: 2},
		ev("cancel_requested", "", 0, "client", 200, nil))
	require.False(t, linearizable(t, ops, f))
}

// A cancelled run's RUNNING node whose owner froze: a claimer that finds
// the lease expired ends it CANCELLED, and the owner's late heartbeat is
// refused as not running.
func TestClaimOfACancelledRunsNodeEndsIt(t *testing.T) {
	t.Parallel()
	ops := []Op{
		op("r1", "claim", "a", 1, "c1", 0, 1, OK),
		refused(op("r2", "claim", "a", 0, "c2", 2500, 2501, Refused), "fence: run cancelled"),
		refused(op("r2", "claim", "a", 0, "c3", 2600, 2601, Refused), "fence: node done"),
		refused(op("r1", "heartbeat", "a", 1, "c1", 3000, 3001, Refused), "fence: node not running"),
	}
	f := runFinal(fence.NodeInfo{ID: "a", State: "CANCELLED", Epoch: 1},
		ev("claimed", "a", 1, "r1", 0, nil), ev("cancel_requested", "", 0, "client", 500, nil))
	require.True(t, linearizable(t, ops, f))
}
