package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
)

// ownCluster is a Redis Cluster the bench started for itself (-cluster N):
// N masters on loopback, no replicas, no persistence, formed by
// redis-cli --cluster create, so its masters own contiguous, equal slot
// ranges as a user's would. redis-cli wants 3 masters at least; one
// master is given every slot with CLUSTER ADDSLOTSRANGE instead, which
// measures the cluster client alone, without the spread. internal/redistest starts the same for tests,
// but it needs a testing.TB.
type ownCluster struct {
	nodes []*exec.Cmd
	dirs  []string
	addrs []string
}

func startOwnCluster(ctx context.Context, masters int) (c *ownCluster, err error) {
	c = &ownCluster{}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	for range masters {
		port, err := freePort()
		if err != nil {
			return c, err
		}
		bus, err := freePort() // port+10000 may be taken or past 65535
		if err != nil {
			return c, err
		}
		dir, err := os.MkdirTemp("", "baton-bench-cluster-")
		if err != nil {
			return c, err
		}
		c.dirs = append(c.dirs, dir)
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(bus),
			// A lone master does not know its address otherwise: CLUSTER SLOTS
			// would name it by port alone.
			"--cluster-announce-ip", "127.0.0.1")
		if err := cmd.Start(); err != nil {
			return c, fmt.Errorf("own cluster: %w (is redis-server installed?)", err)
		}
		c.nodes = append(c.nodes, cmd)
		c.addrs = append(c.addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	for _, a := range c.addrs {
		if err := waitPing(ctx, a, 5*time.Second); err != nil {
			return c, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if masters == 1 {
		cl := redis.NewClient(&redis.Options{Addr: c.addrs[0]})
		defer cl.Close()
		if err := cl.Do(cctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			return c, fmt.Errorf("CLUSTER ADDSLOTSRANGE: %w", err)
		}
		return c, c.waitOK(cctx)
	}
	args := append([]string{"--cluster", "create"}, c.addrs...)
	out, err := exec.CommandContext(cctx, "redis-cli", append(args, "--cluster-yes")...).CombinedOutput()
	if err != nil {
		return c, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	return c, c.waitOK(cctx)
}

// waitOK waits until every node reports cluster_state:ok and knows every
// master: redis-cli returns before the last nodes have met.
func (c *ownCluster) waitOK(ctx context.Context) error {
	var last error
	for {
		last = nil
		for _, a := range c.addrs {
			cl := redis.NewClient(&redis.Options{Addr: a})
			info, err := cl.ClusterInfo(ctx).Result()
			_ = cl.Close()
			switch {
			case err != nil:
				last = err
			case !strings.Contains(info, "cluster_state:ok"):
				last = fmt.Errorf("%s: cluster_state not ok", a)
			case !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.addrs))):
				last = fmt.Errorf("%s: not every node known yet", a)
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("own cluster did not settle: %w", errors.Join(last, ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the servers the bench started (by their own pids) and removes
// their directories.
func (c *ownCluster) stop() {
	for _, cmd := range c.nodes {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	for _, d := range c.dirs {
		_ = os.RemoveAll(d)
	}
}

// waitPing waits for a server just started to answer. It dials before it
// pings, so that go-redis does not log each refused dial of its pool.
func waitPing(ctx context.Context, addr string, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(within); ; {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			err = c.Ping(ctx).Err()
		}
		if err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("redis on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openCluster connects both systems to the cluster o.clusterAddrs names,
// with a client as runner.RedisConfig.Open makes one (slot map reloaded
// every second) but the bench's pool and protocol, and checks that the
// bench may empty every master.
func openCluster(ctx context.Context, o options, out io.Writer) (*target, error) {
	if err := (runner.RedisConfig{ClusterAddrs: o.clusterAddrs}).Validate(); err != nil {
		return nil, err
	}
	opt := &redis.ClusterOptions{Addrs: o.clusterAddrs, Protocol: o.resp,
		PoolSize: max(32, 2*o.concurrency), ClusterStateReloadInterval: time.Second}
	rawOpt := *opt
	rawOpt.PoolSize = 4
	rawOpt.ReadTimeout = time.Minute
	raw := redis.NewClusterClient(&rawOpt)
	t := &target{rdb: redis.NewClusterClient(opt), raw: raw, cluster: raw, count: newRTCounter(),
		queues: queueNames(o.queues), flushAllowed: o.flush}
	t.rdb.AddHook(t.count)
	if o.rtt > 0 {
		t.rdb.AddHook(latency(o.rtt))
	}
	slots, err := raw.ClusterSlots(ctx).Result()
	if err != nil {
		t.close()
		return nil, fmt.Errorf("cluster %s: %w", strings.Join(o.clusterAddrs, ","), err)
	}
	owner := func(slot int) string {
		for _, s := range slots {
			if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr
			}
		}
		return "?"
	}
	masters := map[string][]string{}
	for _, s := range slots {
		if len(s.Nodes) > 0 {
			a := s.Nodes[0].Addr
			masters[a] = append(masters[a], fmt.Sprintf("%d-%d", s.Start, s.End))
		}
	}
	t.masters = len(masters)
	var desc []string
	for _, a := range slices.Sorted(maps.Keys(masters)) {
		desc = append(desc, a+" slots "+strings.Join(masters[a], ","))
	}
	fmt.Fprintf(out, "redis:  cluster, masters: %d (%s), pool %d per node, RESP%d\n",
		len(masters), strings.Join(desc, "; "), opt.PoolSize, opt.Protocol)
	var where []string
	on := map[string]bool{}
	for _, q := range t.queues {
		slot := int(fence.Slot("asynq:{" + q + "}"))
		where = append(where, fmt.Sprintf("%s (slot %d, %s)", q, slot, owner(slot)))
		on[owner(slot)] = true
	}
	fmt.Fprintf(out, "queues: %s: every Asynq key of a queue is in its slot, so its tasks live on %d of %d masters; "+
		"baton's own keys are cut into %d shards over every master\n", strings.Join(where, ", "), len(on), len(masters), fence.Shards)
	size, err := raw.DBSize(ctx).Result() // summed over masters
	if err != nil {
		t.close()
		return nil, fmt.Errorf("cluster dbsize: %w", err)
	}
	return t, t.checkEmpty(out, size, "the cluster", "FLUSHDB every master")
}

// queueNames are n Asynq queue names: "default" alone, or n names whose
// hash slots lie in the middle of the n equal slot ranges, so that on a
// cluster of n masters made by redis-cli each master holds one queue.
func queueNames(n int) []string {
	if n <= 1 {
		return []string{queue}
	}
	names := make([]string, n)
	for i := range n {
		center := (2*i + 1) * 16384 / (2 * n)
		for j := 0; ; j++ {
			name := fmt.Sprintf("bench%d-%d", i, j)
			if d := int(fence.Slot(name)) - center; d > -16384/(4*n) && d < 16384/(4*n) {
				names[i] = name
				break
			}
		}
	}
	return names
}
