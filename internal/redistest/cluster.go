package redistest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions shapes a test cluster. The zero value is three masters
// without replicas, without a password, without persistence.
type ClusterOptions struct {
	// Masters is the number of masters; 0 means 3 (the fewest
	// redis-cli --cluster create accepts).
	Masters int
	// Replicas is the number of replicas per master; 0 means none.
	Replicas int
	// Password, when set, is every node's requirepass and masterauth, so a
	// test can show that AUTH reaches every node a client is redirected to.
	Password string
	// NodeTimeout is cluster-node-timeout; 0 means 1 s. A killed master's
	// replica is promoted about two node timeouts after the kill.
	NodeTimeout time.Duration
	// Args are extra redis-server arguments for every node, e.g.
	// "--appendonly", "yes".
	Args []string
	// Timeout bounds forming the cluster and every wait on it; 0 means 20 s.
	Timeout time.Duration
}

// SlotRange is an inclusive range of hash slots.
type SlotRange struct{ Start, End int }

// ClusterNode is one node as the cluster saw it when the snapshot was taken.
type ClusterNode struct {
	Addr string
	ID   string
	Pid  int
	// Role is "master" or "replica".
	Role string
	// MasterID is a replica's master; empty for a master.
	MasterID string
	// Slots are the ranges a master serves; empty for a replica.
	Slots []SlotRange
	// Alive is false once the test killed the node.
	Alive bool
}

// Cluster is a Redis Cluster of redis-server processes on loopback, owned by
// one test and stopped when it ends. Its methods are safe for concurrent
// use, so a test can kill a node while traffic runs.
type Cluster struct {
	t    testing.TB
	opts ClusterOptions

	mu      sync.Mutex
	servers map[string]*Server // by addr
	order   []string           // addrs in start order
	ids     map[string]string  // addr -> node id
	dead    map[string]bool    // killed
	paused  map[string]bool
	lost    map[string][]SlotRange // a killed master's slots, for WaitPromoted
	clients map[string]*redis.Client
}

// StartCluster starts Masters × (1 + Replicas) redis-server processes in
// cluster mode, forms them into a cluster with redis-cli --cluster create,
// and returns once every node reports cluster_state:ok with every slot
// covered and every replica in sync. The test is skipped if redis-server or
// redis-cli is missing and BATON_REQUIRE_REDIS is unset.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	requireTools(t, "redis-server", "redis-cli")
	opts.Masters = max(opts.Masters, 3)
	opts.NodeTimeout = cmp.Or(opts.NodeTimeout, time.Second)
	opts.Timeout = cmp.Or(opts.Timeout, 20*time.Second)
	c := &Cluster{t: t, opts: opts, servers: map[string]*Server{}, ids: map[string]string{},
		dead: map[string]bool{}, paused: map[string]bool{}, lost: map[string][]SlotRange{},
		clients: map[string]*redis.Client{}}
	t.Cleanup(c.closeClients)

	n := opts.Masters * (1 + opts.Replicas)
	for range n {
		dir := t.TempDir()
		args := []string{"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			// The bus port is chosen too: port+10000 may be taken or past 65535.
			"--cluster-port", strconv.Itoa(FreePort(t)),
			"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
			// A replica whose master is killed mid-test must still take over.
			"--cluster-replica-validity-factor", "0",
			// Redis 7 waits 5 s for more replicas before a diskless sync.
			"--repl-diskless-sync-delay", "0"}
		if opts.Password != "" {
			args = append(args, "--requirepass", opts.Password, "--masterauth", opts.Password)
		}
		s := Start(t, append(args, opts.Args...)...)
		c.servers[s.Addr()] = s
		c.order = append(c.order, s.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	create := append([]string{"--cluster", "create"}, c.order...)
	create = append(create, "--cluster-replicas", strconv.Itoa(opts.Replicas), "--cluster-yes")
	cmd := exec.CommandContext(ctx, "redis-cli", create...)
	cmd.Env = os.Environ()
	if opts.Password != "" {
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+opts.Password) // not on the command line
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range c.order {
		id, err := c.node(addr).ClusterMyID(ctx).Result()
		if err != nil {
			t.Fatalf("CLUSTER MYID on %s: %v", addr, err)
		}
		c.ids[addr] = id
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("cluster did not settle: %v", err)
	}
	return c
}

// Addrs are the seed addresses: every node started, in start order.
func (c *Cluster) Addrs() []string { return slices.Clone(c.order) }

// Password is the password every node requires, or "".
func (c *Cluster) Password() string { return c.opts.Password }

// ClientOptions returns fresh options that reach the cluster, for a test
// that tunes the client (e.g. ClusterStateReloadInterval).
func (c *Cluster) ClientOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), Password: c.opts.Password}
}

// Client returns a cluster client with go-redis's defaults over every seed,
// closed when the test ends. After a master is killed it keeps its slot map
// until a MOVED or ClusterStateReloadInterval (60 s): call ReloadState.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(c.ClientOptions())
	c.t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// NodeClient returns the cluster's own client to one node (no redirects
// followed), for asserting what a node answers. Do not close it.
func (c *Cluster) NodeClient(addr string) *redis.Client { return c.node(addr) }

func (c *Cluster) node(addr string) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[addr]; ok {
		return cl
	}
	// Short timeouts: a paused node must not stall a poll for long.
	cl := redis.NewClient(&redis.Options{Addr: addr, Password: c.opts.Password,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: -1, PoolSize: 4})
	c.clients[addr] = cl
	return cl
}

func (c *Cluster) closeClients() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clients {
		_ = cl.Close()
	}
}

// live returns the nodes neither killed nor paused, in start order.
func (c *Cluster) live() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, a := range c.order {
		if !c.dead[a] && !c.paused[a] {
			out = append(out, a)
		}
	}
	return out
}

// Nodes returns every node started, with roles and slots as the first live
// node reports them.
func (c *Cluster) Nodes(ctx context.Context) ([]ClusterNode, error) {
	live := c.live()
	if len(live) == 0 {
		return nil, errors.New("redistest: no live cluster node")
	}
	view, err := c.view(ctx, live[0])
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ClusterNode, 0, len(c.order))
	for _, addr := range c.order {
		e := view[c.ids[addr]]
		n := ClusterNode{Addr: addr, ID: c.ids[addr], Role: e.role, MasterID: e.master,
			Slots: e.slots, Alive: !c.dead[addr]}
		if s := c.servers[addr]; s.cmd != nil {
			n.Pid = s.Pid()
		}
		out = append(out, n)
	}
	return out, nil
}

// Masters returns the addresses of the live masters.
func (c *Cluster) Masters(ctx context.Context) ([]string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		if n.Alive && n.Role == "master" {
			out = append(out, n.Addr)
		}
	}
	return out, nil
}

// KeySlot asks a live node which slot key hashes to.
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	live := c.live()
	if len(live) == 0 {
		return 0, errors.New("redistest: no live cluster node")
	}
	n, err := c.node(live[0]).ClusterKeySlot(ctx, key).Result()
	return int(n), err
}

// Kill sends SIGKILL to the node at addr and waits for it to exit. A
// master's slots are remembered for WaitPromoted.
func (c *Cluster) Kill(addr string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	nodes, _ := c.Nodes(ctx) // best effort: the view before the kill
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.servers[addr]
	if !ok {
		c.t.Errorf("redistest: no cluster node %s", addr)
		return
	}
	for _, n := range nodes {
		if n.Addr == addr && n.Role == "master" {
			c.lost[addr] = n.Slots
		}
	}
	s.Stop()
	c.dead[addr] = true
}

// Pause stops the node at addr with SIGSTOP: its connections hang.
// Health checks skip it until Resume.
func (c *Cluster) Pause(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.servers[addr]; ok && !c.dead[addr] {
		s.Pause()
		c.paused[addr] = true
	}
}

// Resume continues a paused node with SIGCONT.
func (c *Cluster) Resume(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.servers[addr]; ok && c.paused[addr] {
		s.Resume()
		delete(c.paused, addr)
	}
}

// Failover runs CLUSTER FAILOVER on a replica (its master must be up: the
// two hand over without losing writes), then waits until the cluster is
// healthy with the replica serving its old master's slots.
func (c *Cluster) Failover(ctx context.Context, replicaAddr string) error {
	if err := c.node(replicaAddr).Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		return fmt.Errorf("CLUSTER FAILOVER on %s: %w", replicaAddr, err)
	}
	return c.poll(ctx, func(ctx context.Context) error {
		view, err := c.view(ctx, replicaAddr)
		if err != nil {
			return err
		}
		if e := view[c.ids[replicaAddr]]; e.role != "master" || len(e.slots) == 0 {
			return fmt.Errorf("%s is still %s", replicaAddr, e.role)
		}
		return c.healthy(ctx)
	})
}

// WaitPromoted waits until the slots the killed master deadAddr served are
// served by a live master, agreed by every live node, and the cluster is
// healthy again. It returns the new master's address.
func (c *Cluster) WaitPromoted(ctx context.Context, deadAddr string) (string, error) {
	c.mu.Lock()
	slots, ok := c.lost[deadAddr]
	c.mu.Unlock()
	if !ok || len(slots) == 0 {
		return "", fmt.Errorf("redistest: %s was not a killed master with slots", deadAddr)
	}
	var promoted string
	err := c.poll(ctx, func(ctx context.Context) error {
		if err := c.healthy(ctx); err != nil {
			return err
		}
		view, err := c.view(ctx, c.live()[0]) // healthy: at least one is live
		if err != nil {
			return err
		}
		for id, e := range view {
			if e.role == "master" && serves(e.slots, slots[0].Start) {
				promoted = c.addrOf(id)
				if promoted == deadAddr {
					return fmt.Errorf("slot %d still on %s", slots[0].Start, deadAddr)
				}
				return nil
			}
		}
		return fmt.Errorf("no master serves slot %d", slots[0].Start)
	})
	return promoted, err
}

func (c *Cluster) addrOf(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, i := range c.ids {
		if i == id {
			return a
		}
	}
	return ""
}

// Contains reports whether slot lies in r.
func (r SlotRange) Contains(slot int) bool { return r.Start <= slot && slot <= r.End }

// KeySlot asks the node at addr (no password) which hash slot key maps to,
// to cross-check a client-side slot function against Redis itself.
func KeySlot(t testing.TB, addr, key string) int {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: addr})
	defer cl.Close()
	n, err := cl.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT %q on %s: %v", key, addr, err)
	}
	return int(n)
}

// Restart starts a node the test killed again, on its port and with its
// nodes.conf. Without persistence it comes back empty; a master whose
// slots a replica took over rejoins as that replica's replica (what an
// operator's restart does). It returns once the cluster is healthy with
// the node in it, in sync if it is a replica.
func (c *Cluster) Restart(ctx context.Context, addr string) error {
	c.mu.Lock()
	s, ok := c.servers[addr]
	if !ok || !c.dead[addr] {
		c.mu.Unlock()
		return fmt.Errorf("redistest: %s is not a killed node of this cluster", addr)
	}
	s.start()
	delete(c.dead, addr)
	c.mu.Unlock()
	return c.WaitHealthy(ctx)
}
