package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/redistest"
	"github.com/batonrun/baton/runner"
)

// This file is the fixture of the Redis Cluster tests (cluster_test.go):
// a cluster on loopback, the environment that points the runner and
// enqueue binaries at it, a Go client configured exactly as theirs, run
// specs over threads spread across the shards, and the reading of the
// runners' protocol histories.

// redisCluster is a Redis Cluster and the processes a test starts on it.
type redisCluster struct {
	*cluster
	rc *redistest.Cluster
	// client submits and reads runs through a cluster client opened by
	// runner.RedisConfig, as the binaries open theirs.
	client *runner.Client
	rdb    redis.UniversalClient
}

func newRedisCluster(t *testing.T, opts redistest.ClusterOptions) *redisCluster {
	t.Helper()
	start := time.Now()
	rc := redistest.StartCluster(t, opts)
	t.Logf("cluster of %d masters with %d replicas each up in %v", max(opts.Masters, 3), opts.Replicas,
		time.Since(start).Round(time.Millisecond))
	env := []string{"REDIS_CLUSTER_ADDRS=" + strings.Join(rc.Addrs(), ",")}
	if opts.Password != "" {
		env = append(env, "REDIS_PASSWORD="+opts.Password)
	}
	rdb, err := runner.RedisConfig{ClusterAddrs: rc.Addrs(), Password: opts.Password}.Open()
	require.NoError(t, err)
	t.Cleanup(func() { _ = rdb.Close() })
	client, err := runner.NewClient(runner.ClientConfig{Redis: rdb})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return &redisCluster{cluster: &cluster{t: t, env: env}, rc: rc, client: client, rdb: rdb}
}

// clusterEnv are the runner settings of the cluster tests: fastEnv's short
// leases, modest concurrency (the machine has two cores), and a lost
// delivery re-sent after 3s instead of 15s.
func clusterEnv(history string, extra ...string) map[string]string {
	env := map[string]string{"CONCURRENCY": "8", "READY_THRESHOLD": "3s", "LOG_LEVEL": "info",
		"HISTORY_FILE": history}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// spreadThreads returns perShard thread ids in every one of fence's
// shards, named prefix-N: the runs of a test then land on every master.
func spreadThreads(prefix string, perShard int) []string {
	var out []string
	count := make([]int, fence.Shards)
	for i := 0; len(out) < perShard*fence.Shards; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if s := fence.ShardOf(id); count[s] < perShard {
			count[s]++
			out = append(out, id)
		}
	}
	return out
}

// shardSlot is the Redis Cluster slot of every key of shard i.
func shardSlot(i int) int { return int(fence.Slot(fence.Keys{}.Leases(i))) }

// threadSlot is the slot of every key of thread.
func threadSlot(thread string) int { return shardSlot(fence.ShardOf(thread)) }

// diamond is a → (b, c) → d; chain is n0 → n1 → … ; each node is input.
func diamond(id, kind, input string) *runner.RunSpec {
	n := func(node string, deps ...string) runner.NodeSpec {
		return runner.NodeSpec{ID: node, Kind: kind, Input: json.RawMessage(input), Deps: deps}
	}
	return &runner.RunSpec{ID: id, Nodes: []runner.NodeSpec{n("a"), n("b", "a"), n("c", "a"), n("d", "b", "c")}}
}

func chain(id, kind, input string, length int) *runner.RunSpec {
	spec := &runner.RunSpec{ID: id}
	for i := range length {
		n := runner.NodeSpec{ID: fmt.Sprintf("n%d", i), Kind: kind, Input: json.RawMessage(input)}
		if i > 0 {
			n.Deps = []string{fmt.Sprintf("n%d", i-1)}
		}
		spec.Nodes = append(spec.Nodes, n)
	}
	return spec
}

// sleepFor is a sleep node's input.
func sleepFor(d time.Duration) string { return fmt.Sprintf(`{"duration":%q}`, d.String()) }

// submitAll submits the specs through the Go client, four at a time.
func (c *redisCluster) submitAll(specs []*runner.RunSpec) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(specs))
	sem := make(chan struct{}, 4)
	for _, s := range specs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.client.Submit(ctx, s); err != nil {
				errs <- fmt.Errorf("submit %s: %w", s.ID, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.t.Fatal(err)
	}
}

// waitEnded polls every run until all have ended, each time reading only
// the runs not yet ended, and returns their final states. Read errors
// (a master failing over, a slot moving) are retried until the deadline.
func (c *redisCluster) waitEnded(runs []string, timeout time.Duration) map[string]*fence.RunInfo {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out := map[string]*fence.RunInfo{}
	var lastErr error
	for len(out) < len(runs) {
		for _, id := range runs {
			if out[id] != nil {
				continue
			}
			info, err := c.client.Status(ctx, id)
			if err != nil {
				lastErr = err
				continue
			}
			switch info.Status {
			case "SUCCEEDED", "FAILED", "CANCELLED":
				out[id] = info
			}
		}
		if len(out) == len(runs) {
			break
		}
		select {
		case <-ctx.Done():
			var open []string
			for _, id := range runs {
				if out[id] == nil {
					open = append(open, id)
				}
			}
			c.t.Fatalf("%d of %d runs had not ended after %v: %v (last read error: %v)",
				len(open), len(runs), timeout, open, lastErr)
		case <-time.After(100 * time.Millisecond): // polling the outcome under test
		}
	}
	return out
}

// requireSucceeded fails with the nodes of every run that did not succeed.
func requireSucceeded(t *testing.T, ended map[string]*fence.RunInfo) {
	t.Helper()
	for id, info := range ended {
		if info.Status != "SUCCEEDED" {
			var nodes []string
			for _, n := range info.Nodes {
				nodes = append(nodes, fmt.Sprintf("%s=%s(attempt %d, epoch %d): %s", n.ID, n.State, n.Attempt, n.Epoch, n.Error))
			}
			t.Errorf("run %s is %s: %s", id, info.Status, strings.Join(nodes, "; "))
		}
	}
}

// masterKeys SCANs each live master (no redirects followed) for baton's
// keys.
func (c *redisCluster) masterKeys(ctx context.Context) map[string][]string {
	c.t.Helper()
	masters, err := c.rc.Masters(ctx)
	require.NoError(c.t, err)
	out := map[string][]string{}
	for _, m := range masters {
		iter := c.rc.NodeClient(m).Scan(ctx, 0, "baton:*", 1000).Iterator()
		for iter.Next(ctx) {
			out[m] = append(out[m], iter.Val())
		}
		require.NoError(c.t, iter.Err(), "SCAN on %s", m)
	}
	return out
}

// slotOwners maps every slot to the live master serving it, as the
// cluster reports now.
func (c *redisCluster) slotOwners(ctx context.Context) func(slot int) string {
	c.t.Helper()
	nodes, err := c.rc.Nodes(ctx)
	require.NoError(c.t, err)
	return func(slot int) string {
		for _, n := range nodes {
			if n.Alive && n.Role == "master" && slices.ContainsFunc(n.Slots, func(r redistest.SlotRange) bool { return r.Contains(slot) }) {
				return n.Addr
			}
		}
		return ""
	}
}

// replicaOf returns the address of a replica of the master at addr.
func (c *redisCluster) replicaOf(ctx context.Context, addr string) string {
	c.t.Helper()
	nodes, err := c.rc.Nodes(ctx)
	require.NoError(c.t, err)
	var id string
	for _, n := range nodes {
		if n.Addr == addr {
			id = n.ID
		}
	}
	for _, n := range nodes {
		if n.Alive && n.Role == "replica" && n.MasterID == id {
			return n.Addr
		}
	}
	c.t.Fatalf("master %s has no live replica", addr)
	return ""
}

// readHistory reads the runners' HISTORY_FILEs: one fence.Op a line. A
// runner may be appending while the test reads, so a last line without
// its newline is not read yet.
func readHistory(t *testing.T, paths ...string) []fence.Op {
	t.Helper()
	var ops []fence.Op
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		} else {
			b = nil
		}
		for line := range bytes.Lines(b) {
			var op fence.Op
			require.NoError(t, json.Unmarshal(line, &op), "history line %q", line)
			ops = append(ops, op)
		}
	}
	return ops
}

// readSettledHistory reads the runners' histories (readHistory) once they
// hold an accepted commit for nodes nodes, or after 10 s: a runner
// appends a call's line after Redis answered it, so a run can be seen
// ended before the line of its last commit is written.
func readSettledHistory(t *testing.T, nodes int, paths ...string) []fence.Op {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ops := readHistory(t, paths...)
		if len(auditHistory(ops).Commits) >= nodes || time.Now().After(deadline) {
			return ops
		}
		time.Sleep(50 * time.Millisecond) // polling files other processes append to
	}
}

// audit is what the histories say about ownership, per node (run/node).
type audit struct {
	// Commits are the distinct accepted commits (epoch/claim id): more
	// than one for a node is a result stored twice.
	Commits map[string][]string
	// Epochs are the claim ids each granted epoch went to: an epoch
	// granted to two claims was issued twice.
	Epochs map[string]map[int64][]string
}

func auditHistory(ops []fence.Op) audit {
	a := audit{Commits: map[string][]string{}, Epochs: map[string]map[int64][]string{}}
	grant := func(run, node string, epoch int64, claim string) {
		key := run + "/" + node
		if a.Epochs[key] == nil {
			a.Epochs[key] = map[int64][]string{}
		}
		if !slices.Contains(a.Epochs[key][epoch], claim) {
			a.Epochs[key][epoch] = append(a.Epochs[key][epoch], claim)
		}
	}
	for _, op := range ops {
		if op.Outcome != "ok" {
			continue
		}
		switch op.Op {
		case "claim":
			grant(op.Run, op.Node, op.Epoch, op.Claim)
		case "commit":
			key := op.Run + "/" + op.Node
			id := fmt.Sprintf("%d/%s", op.Epoch, op.Claim)
			if !slices.Contains(a.Commits[key], id) {
				a.Commits[key] = append(a.Commits[key], id)
			}
			if op.Next != nil {
				grant(op.Run, op.Next.Node, op.Next.Epoch, op.Next.Claim)
			}
		}
	}
	return a
}

// DoubleCommits lists the nodes with more than one accepted commit.
func (a audit) DoubleCommits() []string {
	var out []string
	for k, ids := range a.Commits {
		if len(ids) > 1 {
			out = append(out, fmt.Sprintf("%s: %v", k, ids))
		}
	}
	slices.Sort(out)
	return out
}

// ReissuedEpochs lists the nodes one of whose epochs went to two claims.
func (a audit) ReissuedEpochs() []string {
	var out []string
	for k, epochs := range a.Epochs {
		for e, claims := range epochs {
			if len(claims) > 1 {
				out = append(out, fmt.Sprintf("%s: epoch %d to %v", k, e, claims))
			}
		}
	}
	slices.Sort(out)
	return out
}

// failedCalls counts, by operation and reply (TRYAGAIN, ASK, MOVED, ...),
// the protocol calls that failed with a Redis or network error rather
// than an answer, keeping the first message of each "other" kind.
func failedCalls(ops []fence.Op) map[string]int {
	out := map[string]int{}
	for _, op := range ops {
		if op.Outcome != "unknown" {
			continue
		}
		kind := ""
		for _, p := range []string{"TRYAGAIN", "ASK", "MOVED", "CLUSTERDOWN", "CROSSSLOT", "connection refused", "EOF",
			"not acknowledged by enough replicas", "i/o timeout", "context deadline exceeded"} {
			if strings.Contains(op.Err, p) {
				kind = p
				break
			}
		}
		if kind == "" {
			kind = "other: " + op.Err
		}
		out[op.Op+" "+kind]++
	}
	return out
}

// nodeStory is a node's events, as the enqueue binary prints them, in
// one line: "run/node [claimed@1 heartbeat_lost@1 takeover@2 …]".
func (c *redisCluster) nodeStory(run, node string) string {
	var story []string
	for _, e := range c.events(run) {
		if e.Node == node {
			s := fmt.Sprintf("%s@%d", e.Type, e.Epoch)
			if e.Worker != "" {
				s += "(" + e.Worker + ")"
			}
			if r := e.Details["reason"]; r != "" {
				s += fmt.Sprintf("[%s]", r)
			}
			story = append(story, s)
		}
	}
	return fmt.Sprintf("%s/%s %v", run, node, story)
}

// logLines returns the lines of a process's output that contain any of subs.
func logLines(out string, subs ...string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		for _, s := range subs {
			if strings.Contains(line, s) {
				lines = append(lines, strings.TrimRight(line, "\n"))
				break
			}
		}
	}
	return lines
}
