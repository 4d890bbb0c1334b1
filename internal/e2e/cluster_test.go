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
// over every master, the loss of a master mid-run (clusterfailover_test.go),
// and a slot moving while its keys are in use. Fixture: clusterenv_test.go.

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
		// The run hash, a hash per node and the event stream; or, once
		// the run is retained, its packed key (a run that SUCCEEDED).
		runKey := fence.Keys{}.Run(th, th)
		if _, ok := on[runKey]; !ok {
			runKey = fence.Keys{}.Packed(th, th)
		} else {
			require.GreaterOrEqual(t, found, 6, "thread %s has %d keys on %s", th, found, want)
		}
		require.Equal(t, want, on[runKey], "thread %s: its run's key", th)
		perMaster[want]++
	}
	for _, m := range masters {
		require.NotEmpty(t, keys[m], "master %s holds no baton key", m)
		require.NotZero(t, perMaster[m], "no thread on master %s", m)
		t.Logf("master %s: %d baton keys, %d of %d threads", m, len(keys[m]), perMaster[m], len(threads))
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
