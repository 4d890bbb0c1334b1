package client

// State is a run's status or a node's state as baton stores it
// (fence.RunInfo.Status, fence.NodeInfo.State). Compare with the constants,
// not with strings: State(info.Status) == Succeeded.
type State string

// A run is QUEUED behind its thread's active run or RUNNING until it ends
// SUCCEEDED, FAILED or CANCELLED. A node is BLOCKED until its deps are done,
// READY to be claimed, RUNNING under a lease, WAITING for a resume (parked),
// and ends as a run does.
const (
	Queued    State = "QUEUED"
	Running   State = "RUNNING"
	Succeeded State = "SUCCEEDED"
	Failed    State = "FAILED"
	Cancelled State = "CANCELLED"

	Blocked State = "BLOCKED"
	Ready   State = "READY"
	Waiting State = "WAITING"
)

// Ended reports whether s is final: SUCCEEDED, FAILED or CANCELLED. Only a
// retry (Client.Retry) moves a run or node on from there.
func (s State) Ended() bool { return s == Succeeded || s == Failed || s == Cancelled }
