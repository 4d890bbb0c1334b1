package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// The Redis Cluster suite: the runner and enqueue binaries on a real
// cluster on loopback (REDIS_CLUSTER_ADDRS), through a spread of threads
// over every master, the loss of a master mid-run, and a slot moving
// while its keys are in use. Fixture: clusterenv_test.go.

// TestClusterRunsSpreadOverEveryMaster: two runners on a password-protected
// 3-master cluster run 48 DAGs, one thread each, three threads in each of
// the 16 shards. Every run succeeds, the CLI lists all of them across the
// shards, every master holds baton's keys, and every thread's keys sit
// together on the master that serves its shard's slot.
func TestClusterRunsSpreadOverEveryMaster(t *testing.T) {
	t.Parallel()
	c := newRedisCluster(t, redistest.ClusterOptions{Masters: 3, Password: "baton-cluster-secret"})
	dir := t.TempDir()
	c.startRunner("ra", clusterEnv(filepath.Join(dir, "ra.jsonl")))
	c.startRunner("rb", clusterEnv(filepath.Join(dir, "rb.jsonl")))

	threads := spreadThreads("spread", 3)
	var specs []*runner.RunSpec
	for i, th := range threads {
		if i%4 == 3 {
			specs = append(specs, chain(th, "noop", `{"step":true}`, 5))
		} else {
			specs = append(specs, diamond(th, "noop", `{"leg":true}`))
		}
	}
	begin := time.Now()
	// The first run goes through the enqueue binary, AUTH and all.
	first, err := json.Marshal(specs[0])
	require.NoError(t, err)
	require.Equal(t, threads[0], c.submit(string(first)))
	c.submitAll(specs[1:])
	ended := c.waitEnded(threads, 40*time.Second)
	requireSucceeded(t, ended)
	t.Logf("%d runs (%d diamonds, %d chains of 5) succeeded in %v", len(threads), len(threads)-len(threads)/4,
		len(threads)/4, time.Since(begin).Round(time.Millisecond))

	// The listing reads every shard, on every master.
	out, errOut, code := c.enqueue("", "list", "--json", "--limit", "100")
	require.Equal(t, 0, code, "list: %s", errOut)
	var listed []struct{ ID, Status string }
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Len(t, listed, len(threads))
	for _, r := range listed {
		require.Equal(t, "SUCCEEDED", r.Status, r.ID)
	}
	require.Equal(t, "SUCCEEDED", c.status(threads[len(threads)-1]).Status)

	ctx := t.Context()
	keys := c.masterKeys(ctx)
	owner := c.slotOwners(ctx)
	masters, err := c.rc.Masters(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3)
	on := map[string]string{} // key -> the master it was found on
	for m, ks := range keys {
		for _, k := range ks {
			on[k] = m
		}
	}
	perMaster := map[string]int{}
	for _, th := range threads {
		slot := threadSlot(th)
		require.Equal(t, fence.ShardOf(th), slot*fence.Shards/16384, "shard %d's slot %d is outside its sixteenth", fence.ShardOf(th), slot)
		want := owner(slot)
		found := 0
		for k, m := range on {
			if strings.Contains(k, "}:"+th+":") {
				require.Equal(t, want, m, "key %s of thread %s (slot %d)", k, th, slot)
				found++
			}
		}
		// The run hash, a hash per node and the event stream at least.
		require.GreaterOrEqual(t, found, 6, "thread %s has %d keys on %s", th, found, want)
		require.Equal(t, want, on[fence.Keys{}.Run(th, th)])
		perMaster[want]++
	}
	for _, m := range masters {
		require.NotEmpty(t, keys[m], "master %s holds no baton key", m)
		require.NotZero(t, perMaster[m], "no thread on master %s", m)
		t.Logf("master %s: %d baton keys, %d of %d threads", m, len(keys[m]), perMaster[m], len(threads))
	}
}

// TestClusterMasterKilledMidRun: on 3 masters with a replica each, one
// master is SIGKILLed while nodes of its threads are RUNNING; its replica
// is promoted and the killed node is restarted (it rejoins as a replica).
// Every run completes. With CLAIM_REPLICAS=1 no node has two accepted
// commits and no epoch goes to two claims, as the runners' protocol
// histories show; without it the same figures are measured and logged.
// The lagging_replica cases first stop the replica (SIGSTOP) and cut its
// link, so that it misses what the master acknowledges before the kill:
// the loss asynchronous replication allows, made certain instead of left
// to a sub-millisecond window on loopback. There, without CLAIM_REPLICAS,
// nodes get two accepted commits and continuations get an epoch twice
// (logged); with it, neither (asserted).
func TestClusterMasterKilledMidRun(t *testing.T) {
	t.Parallel()
	for _, lagging := range []bool{false, true} {
		for _, replicas := range []int{1, 0} {
			name := fmt.Sprintf("claim_replicas_%d", replicas)
			if lagging {
				name = "lagging_replica/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				masterKilledMidRun(t, replicas, lagging)
			})
		}
	}
}

func masterKilledMidRun(t *testing.T, claimReplicas int, lagging bool) {
	c := newRedisCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: 1})
	dir := t.TempDir()
	hist := []string{filepath.Join(dir, "ra.jsonl"), filepath.Join(dir, "rb.jsonl")}
	var extra []string
	if claimReplicas > 0 {
		extra = []string{"CLAIM_REPLICAS", fmt.Sprint(claimReplicas)}
	}
	c.startRunner("ra", clusterEnv(hist[0], extra...))
	c.startRunner("rb", clusterEnv(hist[1], extra...))

	threads := spreadThreads("fo", 3)
	var specs []*runner.RunSpec
	for _, th := range threads {
		specs = append(specs, diamond(th, "sleep", sleepFor(300*time.Millisecond)))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	owner := c.slotOwners(ctx)
	// The victim serves baton's threads and asynq:queues, the set every
	// Asynq enqueue adds to first, but not the queue itself (hash tag
	// {default}): enqueues fail while it is down, deliveries already
	// queued survive. (On 3 masters made by redis-cli, slots 3477 and
	// 5718.)
	victim := owner(int(fence.Slot("asynq:queues")))
	require.NotEqual(t, owner(int(fence.Slot("asynq:{default}:pending"))), victim)
	var onVictim []string
	for _, th := range threads {
		if owner(threadSlot(th)) == victim {
			onVictim = append(onVictim, th)
		}
	}
	c.submitAll(specs)
	waitUntil(t, 20*time.Second, "nodes RUNNING on the victim's shards", func() bool {
		running := 0
		for _, th := range onVictim {
			if info, err := c.client.Status(ctx, th); err == nil {
				for _, n := range info.Nodes {
					if n.State == "RUNNING" {
						running++
					}
				}
			}
		}
		return running >= 3
	})

	var replica string
	if lagging {
		// The victim's replica stops and falls behind: what the master
		// acknowledges from now on, it will not have when promoted.
		// A stopped process still receives into its socket buffer, so
		// the master also drops the link: the stopped replica cannot
		// reconnect, and what the master writes next reaches no one.
		replica = c.replicaOf(ctx, victim)
		paused := time.Now()
		c.rc.Pause(replica)
		require.NoError(t, c.rc.NodeClient(victim).ClientKillByFilter(ctx, "TYPE", "replica").Err())
		waitUntil(t, 10*time.Second, "commits on the victim while its replica lags", func() bool {
			n := 0
			for _, op := range readHistory(t, hist...) {
				if op.Op == "commit" && op.Call > paused.UnixNano() && slices.Contains(onVictim, op.Thread) {
					n++
				}
			}
			return n >= 5
		})
	}
	killed := time.Now()
	c.rc.Kill(victim)
	if lagging {
		c.rc.Resume(replica)
	}
	promoted, err := c.rc.WaitPromoted(ctx, victim)
	require.NoError(t, err)
	promotedAfter := time.Since(killed)
	require.NoError(t, c.rc.Restart(ctx, victim))
	rejoinedAfter := time.Since(killed)
	ended := c.waitEnded(threads, 40*time.Second)
	requireSucceeded(t, ended)
	endedAfter := time.Since(killed)

	ops := readHistory(t, hist...)
	a := auditHistory(ops)
	victimThread := func(th string) bool { return slices.Contains(onVictim, th) }
	// When the runs saw the failover end: the first protocol call on the
	// victim's shards begun after the kill that Redis accepted.
	var firstOK time.Duration
	var notReplicated []time.Duration
	for _, op := range ops {
		if !victimThread(op.Thread) || op.Call < killed.UnixNano() {
			continue
		}
		at := time.Duration(op.Return - killed.UnixNano())
		if op.Outcome == "ok" && (firstOK == 0 || at < firstOK) {
			firstOK = at
		}
		if strings.Contains(op.Err, "not acknowledged by enough replicas") {
			notReplicated = append(notReplicated, at)
		}
	}
	if lagging {
		t.Logf("CLAIM_REPLICAS=%d: replica %s was stopped before the kill and resumed after it", claimReplicas, replica)
	}
	t.Logf("CLAIM_REPLICAS=%d: killed master %s with %d of %d threads; %s promoted %v after the kill; "+
		"restarted node back as replica %v after; first accepted call on its shards %v after; all %d runs ended %v after",
		claimReplicas, victim, len(onVictim), len(threads), promoted, promotedAfter.Round(time.Millisecond),
		rejoinedAfter.Round(time.Millisecond), firstOK.Round(time.Millisecond), len(threads), endedAfter.Round(time.Millisecond))
	if len(notReplicated) > 0 {
		t.Logf("CLAIM_REPLICAS=%d: %d calls not acknowledged by a replica, from %v to %v after the kill",
			claimReplicas, len(notReplicated), slices.Min(notReplicated).Round(time.Millisecond),
			slices.Max(notReplicated).Round(time.Millisecond))
	}
	// What the failover cost the runs: nodes claimed again under a later
	// epoch (a lease lapsed or was released while Redis was unreachable),
	// on the victim's threads and on all.
	again, againOnVictim := 0, 0
	var stories []string
	for _, th := range threads {
		for _, n := range ended[th].Nodes {
			if n.Epoch > 1 {
				again++
				if victimThread(th) {
					againOnVictim++
				}
				if len(stories) < 3 {
					stories = append(stories, c.nodeStory(th, n.ID))
				}
			}
		}
	}
	t.Logf("CLAIM_REPLICAS=%d: %d nodes ran again under a later epoch (%d on the victim's threads), e.g. %v; failed calls by reply: %v",
		claimReplicas, again, againOnVictim, stories, failedCalls(ops))
	doubles, reissued := a.DoubleCommits(), a.ReissuedEpochs()
	t.Logf("CLAIM_REPLICAS=%d: %d nodes with two accepted commits %v; %d epochs issued twice %v (of %d nodes committed)",
		claimReplicas, len(doubles), doubles, len(reissued), reissued, len(a.Commits))
	require.Len(t, a.Commits, 4*len(threads), "every node has an accepted commit in the histories")
	if claimReplicas > 0 {
		require.Empty(t, doubles, "a node's result was accepted twice")
		require.Empty(t, reissued, "an epoch was granted to two claims")
	}
}

// TestClusterSlotMigrationMidRun: while long chains run on the threads of
// one shard, that shard's slot is migrated to another master a few keys
// at a time, the runners' scripts meeting the half-moved slot (ASK,
// TRYAGAIN) between batches. Every run completes, and the shard's keys
// end up on the new master and nowhere else. With CLAIM_REPLICAS=1 claims
// and commits go to the slot's master directly (a pipeline with WAIT,
// which follows no redirect), so they meet ASK and MOVED themselves; the
// runs complete all the same.
func TestClusterSlotMigrationMidRun(t *testing.T) {
	t.Parallel()
	for _, replicas := range []int{0, 1} {
		t.Run(fmt.Sprintf("claim_replicas_%d", replicas), func(t *testing.T) {
			t.Parallel()
			slotMigrationMidRun(t, replicas)
		})
	}
}

func slotMigrationMidRun(t *testing.T, claimReplicas int) {
	c := newRedisCluster(t, redistest.ClusterOptions{Masters: 3, Replicas: claimReplicas})
	dir := t.TempDir()
	hist := []string{filepath.Join(dir, "ra.jsonl"), filepath.Join(dir, "rb.jsonl")}
	var extra []string
	if claimReplicas > 0 {
		extra = []string{"CLAIM_REPLICAS", fmt.Sprint(claimReplicas)}
	}
	ra := c.startRunner("ra", clusterEnv(hist[0], extra...))
	rb := c.startRunner("rb", clusterEnv(hist[1], extra...))

	const shard = 5
	slot := shardSlot(shard)
	threads := spreadThreads("mv", 3)
	var hot, runs []string
	var specs []*runner.RunSpec
	for _, th := range threads {
		runs = append(runs, th)
		if fence.ShardOf(th) == shard {
			hot = append(hot, th)
			specs = append(specs, chain(th, "sleep", sleepFor(250*time.Millisecond), 10))
		} else {
			specs = append(specs, diamond(th, "sleep", sleepFor(50*time.Millisecond)))
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	owner := c.slotOwners(ctx)
	from := owner(slot)
	masters, err := c.rc.Masters(ctx)
	require.NoError(t, err)
	to := masters[slices.IndexFunc(masters, func(m string) bool { return m != from })]

	c.submitAll(specs)
	waitUntil(t, 20*time.Second, "the hot shard's chains to be under way", func() bool {
		info, err := c.client.Status(ctx, hot[0])
		return err == nil && info.Nodes[1].State != "PENDING"
	})
	hotCalls := func() int {
		n := 0
		for _, op := range readHistory(t, hist...) {
			if slices.Contains(hot, op.Thread) {
				n++
			}
		}
		return n
	}
	var batches, moved, quiet atomic.Int64
	var midStatus atomic.Pointer[string]
	begin := time.Now()
	err = c.rc.MigrateSlot(ctx, slot, to, &redistest.MigrateOptions{Batch: 4,
		AfterBatch: func(ctx context.Context, n int) error {
			batches.Add(1)
			moved.Store(int64(n))
			if n >= 8 && midStatus.Load() == nil {
				// A user reads a run whose keys are half moved: the
				// CLI's reads are single-key, and follow ASK.
				st := c.status(hot[0])
				midStatus.Store(&st.Status)
			}
			// Traffic meets the half-moved slot: wait (at most 500ms) for
			// a protocol call on its threads to finish.
			before, deadline := hotCalls(), time.Now().Add(500*time.Millisecond)
			for hotCalls() == before {
				if time.Now().After(deadline) {
					quiet.Add(1)
					return nil
				}
				time.Sleep(10 * time.Millisecond) // polling the runners' history files
			}
			return nil
		}})
	require.NoError(t, err)
	migrated := time.Since(begin)
	hotDone := 0
	for _, th := range hot {
		if info, err := c.client.Status(ctx, th); err == nil && info.Status == "SUCCEEDED" {
			hotDone++
		}
	}

	ended := c.waitEnded(runs, 40*time.Second)
	requireSucceeded(t, ended)
	require.Equal(t, to, c.slotOwners(ctx)(slot), "slot %d did not move", slot)
	keys := c.masterKeys(ctx)
	tag := "}:" // every key of the shard carries its tag
	for m, ks := range keys {
		for _, k := range ks {
			if int(fence.Slot(k)) == slot {
				require.Equal(t, to, m, "key %s of slot %d left on %s", k, slot, m)
			}
		}
	}
	for _, th := range hot {
		require.True(t, slices.ContainsFunc(keys[to], func(k string) bool { return strings.Contains(k, tag+th+":") }),
			"no key of thread %s on %s", th, to)
	}

	require.NotNil(t, midStatus.Load(), "the migration never had 8 keys moved")
	ops := readHistory(t, hist...)
	a := auditHistory(ops)
	// What the half-moved slot cost: calls on its threads that failed
	// while keys were split between the two masters, and nodes run again
	// because their renewals failed past their lease.
	var during, failedDuring int
	for _, op := range ops {
		if slices.Contains(hot, op.Thread) && op.Call >= begin.UnixNano() && op.Return <= begin.Add(migrated).UnixNano() {
			during++
			if op.Outcome == "unknown" {
				failedDuring++
			}
		}
	}
	var reruns []string
	for _, th := range hot {
		for _, n := range ended[th].Nodes {
			if n.Epoch > 1 || n.Attempt > 1 {
				reruns = append(reruns, c.nodeStory(th, n.ID))
			}
		}
	}
	t.Logf("CLAIM_REPLICAS=%d: slot %d (shard %d, %d threads, chains of 10 × 250ms) moved %s → %s: %d keys in %d batches of 4 in %v "+
		"(%d batches saw no call within 500ms); %d of %d hot runs had finished by then",
		claimReplicas, slot, shard, len(hot), from, to, moved.Load(), batches.Load()-1, migrated.Round(time.Millisecond),
		quiet.Load(), hotDone, len(hot))
	t.Logf("CLAIM_REPLICAS=%d: while the slot was half moved %d of %d calls on its threads failed; failed calls by reply: %v",
		claimReplicas, failedDuring, during, failedCalls(ops))
	t.Logf("CLAIM_REPLICAS=%d: nodes run again (a lease lapsed while its renewals met TRYAGAIN): %d %v; CLI status mid-migration: %s",
		claimReplicas, len(reruns), reruns, *midStatus.Load())
	for _, p := range []*runnerProc{ra, rb} {
		lines := logLines(p.log.String(), "TRYAGAIN", "ASK ", "MOVED", "CROSSSLOT", "level=ERROR")
		for i, l := range lines {
			if i == 5 {
				t.Logf("runner %s: … %d lines mention a redirect or an error in all", p.id, len(lines))
				break
			}
			t.Logf("runner %s: %s", p.id, l)
		}
	}
	require.Empty(t, a.DoubleCommits())
}
