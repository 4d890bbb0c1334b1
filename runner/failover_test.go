package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// failoverSetup is a Sentinel set-up with passwords, a store over it
// through RedisConfig, and k one-node runs submitted and replicated.
type failoverSetup struct {
	set   *redistest.Sentinel
	rdb   redis.UniversalClient
	store *fence.Store
	refs  []fence.NodeRef
}

func newFailoverSetup(t *testing.T, k int, opt *fence.Options) *failoverSetup {
	t.Helper()
	set := redistest.StartSentinel(t, redistest.SentinelOptions{Password: "data-secret-1", SentinelPassword: "sentinel-secret-1"})
	rdb, err := runner.RedisConfig{SentinelAddrs: set.SentinelAddrs(), SentinelMaster: set.MasterName,
		SentinelPassword: set.SentinelPassword(), Password: set.Password()}.Open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	f := &failoverSetup{set: set, rdb: rdb, store: fence.New(rdb, opt)}
	ctx := t.Context()
	for i := range k {
		run := fmt.Sprintf("fo-%d", i)
		_, err := f.store.Submit(ctx, fence.SubmitArgs{Run: run, Digest: "d", Nodes: []fence.NodeSpec{{ID: "a",
			Input: "null", Deps: []string{}, Dependents: []string{}, Descendants: []string{}, MaxAttempts: 3}}})
		require.NoError(t, err)
		f.refs = append(f.refs, fence.NodeRef{Thread: run, Run: run, Node: "a"})
	}
	// WAIT on the connection that wrote last: the replica has every run.
	var acked *redis.Cmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "fo-synced", "1", 0)
		acked = p.Do(ctx, "wait", 1, 5000)
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, acked.Val(), "the replica holds the submitted runs")
	return f
}

// failover cuts the replica off (a wrong masterauth, then its link
// killed) so that it misses what happens in between, then kills the
// primary, lets the replica authenticate again and waits until the
// sentinels have promoted it and the client writes to it.
func (f *failoverSetup) failover(t *testing.T, between func()) {
	t.Helper()
	ctx := t.Context()
	primary, err := f.set.PrimaryAddr(ctx)
	require.NoError(t, err)
	replica := f.set.DataAddrs()[0]
	if replica == primary {
		replica = f.set.DataAddrs()[1]
	}
	node := func(addr string) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: f.set.Password(), MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	p, r := node(primary), node(replica)
	require.NoError(t, r.ConfigSet(ctx, "masterauth", "wrong-password").Err())
	deadline := time.Now().Add(10 * time.Second)
	for {
		require.NoError(t, p.Do(ctx, "client", "kill", "type", "replica").Err())
		info, err := p.Info(ctx, "replication").Result()
		require.NoError(t, err)
		if strings.Contains(info, "connected_slaves:0") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the replica keeps its link: %s", info)
		time.Sleep(20 * time.Millisecond) // polling a disconnect
	}
	between()
	f.set.Kill(primary)
	require.NoError(t, r.ConfigSet(ctx, "masterauth", f.set.Password()).Err())
	start := time.Now()
	_, err = f.set.WaitFailover(ctx, primary)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for f.rdb.Set(wctx, "fo-probe", "1", 0).Err() != nil {
		require.NoError(t, wctx.Err(), "the client never reached the new primary")
		time.Sleep(20 * time.Millisecond) // polling a reconnect
	}
	t.Logf("failover: primary %s killed, replica %s writable after %s", primary, replica, time.Since(start).Round(time.Millisecond))
}

// Asynchronous replication loses acknowledged claims in a failover, and
// the promoted replica issues the same epochs again. The claim id still
// fences: every write of a lost claim is refused on the new primary, so
// Redis never accepts two owners' outcomes. (A downstream that admits by
// epoch alone would see two holders of one epoch: see CLAIM_REPLICAS.)
func TestFailoverReissuesEpochsButClaimIDsFence(t *testing.T) {
	t.Parallel()
	const k = 20
	f := newFailoverSetup(t, k, nil)
	ctx := t.Context()
	lost := make([]*fence.Claimed, k)
	f.failover(t, func() {
		for i, ref := range f.refs {
			c, err := f.store.Claim(ctx, ref, "w-old", time.Minute, time.Second)
			require.NoError(t, err, "the primary acknowledges the claim")
			lost[i] = c
		}
	})
	reissued := 0
	for i, ref := range f.refs {
		c, err := f.store.Claim(ctx, ref, "w-new", time.Minute, time.Second)
		require.NoError(t, err, "the node is free again on the promoted replica")
		if c.Epoch == lost[i].Epoch {
			reissued++
		}
		_, err = f.store.Commit(ctx, lost[i].Lease, []byte(`"old"`), nil)
		require.ErrorIs(t, err, fence.ErrNotOwner, "the lost claim's write is refused: same epoch, other claim id")
		_, err = f.store.Commit(ctx, c.Lease, []byte(`"new"`), nil)
		require.NoError(t, err)
	}
	t.Logf("without CLAIM_REPLICAS: %d of %d acknowledged claims lost in the failover, epoch issued again: %d; "+
		"stale writes accepted: 0", k, k, reissued)
	require.Equal(t, k, reissued, "the replica missed every claim made while it lagged")
}

// With ClaimReplicas a claim that the replica does not hold is never
// acknowledged, so no handler starts on it and no epoch is handed out
// twice: after the failover the same claim id claims the node once, when
// a replica holds it again. A primary left without a replica refuses to
// acknowledge claims: availability is traded for the guarantee.
func TestFailoverWithClaimReplicasIssuesEachEpochOnce(t *testing.T) {
	t.Parallel()
	const k = 10
	f := newFailoverSetup(t, k, &fence.Options{ClaimReplicas: 1, ReplicaTimeout: 100 * time.Millisecond})
	ctx := t.Context()
	ids := make([]string, k)
	f.failover(t, func() {
		for i, ref := range f.refs {
			ids[i] = fence.NewClaimID()
			_, err := f.store.ClaimAs(ctx, ref, "w1", ids[i], time.Minute, time.Second)
			require.ErrorIs(t, err, fence.ErrNotReplicated, "a lagging replica: the claim is not acknowledged")
		}
	})
	_, err := f.store.ClaimAs(ctx, f.refs[0], "w1", ids[0], time.Minute, time.Second)
	require.ErrorIs(t, err, fence.ErrNotReplicated, "the promoted primary has no replica yet")

	// A new replica joins the promoted primary; the retried claims are
	// acknowledged, each at the first epoch any handler saw.
	primary, err := f.set.PrimaryAddr(ctx)
	require.NoError(t, err)
	host, port, _ := strings.Cut(primary, ":")
	redistest.Start(t, "--replicaof", host, port, "--masterauth", f.set.Password())
	for i, ref := range f.refs {
		var c *fence.Claimed
		deadline := time.Now().Add(15 * time.Second)
		for {
			c, err = f.store.ClaimAs(ctx, ref, "w1", ids[i], time.Minute, time.Second)
			if !errors.Is(err, fence.ErrNotReplicated) || time.Now().After(deadline) {
				break
			}
		}
		require.NoError(t, err)
		require.Equal(t, int64(1), c.Epoch, "one acknowledged claim per epoch")
		_, err = f.store.Commit(ctx, c.Lease, []byte(`1`), nil)
		require.NoError(t, err)
	}
}
