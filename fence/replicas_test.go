package fence_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
)

// TestClaimReplicas: with ClaimReplicas a claim counts only once a replica
// holds it. Without a replica the claim is refused as not replicated,
// and its retry under the same claim id, once a replica has caught up,
// returns that same claim (one epoch, one attempt), now on the replica.
func TestClaimReplicas(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	rdb := primary.Client(t)
	s := fence.New(rdb, &fence.Options{ClaimReplicas: 1, ReplicaTimeout: 100 * time.Millisecond})
	ctx := t.Context()
	_, err := s.Submit(ctx, spec("rep", node("a"), node("b", "a")))
	require.NoError(t, err)
	ref := fence.NodeRef{Thread: "rep", Run: "rep", Node: "a"}
	claimID := fence.NewClaimID()

	_, err = s.ClaimAs(ctx, ref, "w1", claimID, longTTL, grace)
	var re *fence.ReplicationError
	require.ErrorAs(t, err, &re)
	require.Equal(t, fence.ReplicationError{Acked: 0, Want: 1}, *re)
	require.False(t, fence.IsRefused(err), "not a refusal: the caller retries with the same identity")

	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(portOf(t, primary.Addr())))
	c, err := retryUntil(t, func() (*fence.Claimed, error) { return s.ClaimAs(ctx, ref, "w1", claimID, longTTL, grace) })
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Epoch, "the retry is the same claim, not a second one")
	require.Equal(t, int64(1), c.Attempt)

	// The replica holds the claim: a failover to it keeps the owner.
	got, err := replica.Client(t).HMGet(ctx, s.Keys().Node("rep", "rep", "a"), "state", "epoch", "claim").Result()
	require.NoError(t, err)
	require.Equal(t, []any{"RUNNING", "1", claimID}, got)

	// The commit waits too, and the continuation it claims is replicated.
	_, err = s.Commit(ctx, c.Lease, []byte(`1`), c.Dependents)
	require.NoError(t, err)
	state, err := replica.Client(t).HGet(ctx, s.Keys().Node("rep", "rep", "a"), "state").Result()
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", state)
}

// retryUntil calls op until it stops failing with ErrNotReplicated (a
// replica still syncing), for at most 10s.
func retryUntil(t *testing.T, op func() (*fence.Claimed, error)) (*fence.Claimed, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := op()
		if !errors.Is(err, fence.ErrNotReplicated) || time.Now().After(deadline) {
			return c, err
		}
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	p, err := strconv.Atoi(addr[len("127.0.0.1:"):])
	require.NoError(t, err)
	return p
}
