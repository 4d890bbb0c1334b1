package check

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
)

// A release whose replies were lost, retried after the node was claimed
// again, is answered as the first time (release.lua's end_claim): legal.
// An ok from a claim that never ended the node is not.
func TestReleaseReplayAfterATakeover(t *testing.T) {
	t.Parallel()
	released := func(o *Op) { o.End = "retrying" }
	ops := []Op{
		op("r1", "claim", "a", 1, "c1", 0, 1, OK),
		op("r1", "release", "a", 1, "c1", 100, 200, Unknown),
		op("r2", "claim", "a", 2, "c2", 300, 301, OK),
		with(op("r1", "release", "a", 1, "c1", 400, 401, OK), released),
		op("r2", "commit", "a", 2, "c2", 500, 501, OK),
	}
	f := runFinal(fence.NodeInfo{ID: "a", State: "SUCCEEDED", Epoch: 2})
	require.True(t, linearizable(t, ops, f))

	never := []Op{
		op("r1", "claim", "a", 1, "c1", 0, 1, OK),
		op("r2", "claim", "a", 2, "c2", 300, 301, OK),
		with(op("r1", "release", "a", 1, "c1", 400, 401, OK), released),
		op("r2", "commit", "a", 2, "c2", 500, 501, OK),
	}
	require.False(t, linearizable(t, never, f), "c1 never released the node: its ok fits no order")

	// A fail of the claim that released the node is not a retry of it.
	other := append(ops[:3:3], op("r1", "fail", "a", 1, "c1", 400, 401, OK), ops[4])
	require.False(t, linearizable(t, other, f), "c1 released, it did not fail")
}

// A fail that scheduled a retry, retried after the run's cancel ended the
// node, answers as the first time: retrying.
func TestFailReplayAfterTheRunsCancel(t *testing.T) {
	t.Parallel()
	retrying := func(o *Op) { o.End = "retrying" }
	ops := []Op{
		op("r1", "claim", "a", 1, "c1", 0, 1, OK),
		with(op("r1", "fail", "a", 1, "c1", 100, 101, OK), retrying),
		with(op("r1", "fail", "a", 1, "c1", 400, 401, OK), retrying),
	}
	node := fence.NodeInfo{ID: "a", State: "CANCELLED", Epoch: 1}
	f := runFinal(node, ev("cancel_requested", "", 0, "client", 200, nil), ev("cancelled", "a", 0, "client", 200, nil))
	require.True(t, linearizable(t, ops, f))
}
