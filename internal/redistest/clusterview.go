package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is how the helpers know a cluster has settled: CLUSTER INFO
// and CLUSTER NODES on every live node, polled with a deadline.

// WaitHealthy waits until every live node reports cluster_state:ok with all
// 16384 slots assigned and reachable, every live node sees the same masters
// and slots, no live node is flagged failing, and every live replica is in
// sync with a live master.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	return c.poll(ctx, c.healthy)
}

// poll waits, up to the cluster's Timeout, for check to pass.
func (c *Cluster) poll(ctx context.Context, check func(context.Context) error) error {
	return pollUntil(ctx, c.opts.Timeout, check)
}

// pollUntil runs check every 20 ms until it returns nil or ctx ends or
// timeout passes; the error then says what was last wrong.
func pollUntil(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %w: last: %w", context.Cause(ctx), err)
		case <-tick.C:
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	live := c.live()
	var first map[string]nodeEntry
	for _, addr := range live {
		info, err := c.node(addr).ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", addr, err)
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_slots_ok:16384"} {
			if !strings.Contains(info, want+"\r\n") {
				return fmt.Errorf("%s: no %s", addr, want)
			}
		}
		view, err := c.view(ctx, addr)
		if err != nil {
			return err
		}
		for _, other := range live {
			e, ok := view[c.ids[other]]
			if !ok || e.failing || e.handshake {
				return fmt.Errorf("%s does not see %s as a healthy node", addr, other)
			}
			if e.role == "replica" && !slices.Contains(live, c.addrOf(e.master)) {
				return fmt.Errorf("%s: replica %s follows a node that is down", addr, other)
			}
		}
		if first == nil {
			first = view
		} else if err := sameSlots(first, view); err != nil {
			return fmt.Errorf("%s disagrees with %s: %w", addr, live[0], err)
		}
		if view[c.ids[addr]].role == "replica" {
			repl, err := c.node(addr).Info(ctx, "replication").Result()
			if err != nil {
				return fmt.Errorf("INFO replication on %s: %w", addr, err)
			}
			if !strings.Contains(repl, "master_link_status:up\r\n") ||
				!strings.Contains(repl, "master_sync_in_progress:0\r\n") {
				return fmt.Errorf("replica %s is not in sync", addr)
			}
		}
	}
	return nil
}

func sameSlots(a, b map[string]nodeEntry) error {
	for id, ea := range a {
		eb := b[id]
		if ea.role != eb.role || !slices.Equal(ea.slots, eb.slots) {
			return fmt.Errorf("node %s: %s %v against %s %v", id, ea.role, ea.slots, eb.role, eb.slots)
		}
	}
	return nil
}

// nodeEntry is one line of CLUSTER NODES.
type nodeEntry struct {
	role      string // "master" or "replica"
	master    string
	slots     []SlotRange
	failing   bool // fail or fail?
	handshake bool
	migrating bool // an importing or migrating slot is listed
}

// view parses CLUSTER NODES as addr sees it, by node id.
func (c *Cluster) view(ctx context.Context, addr string) (map[string]nodeEntry, error) {
	raw, err := c.node(addr).ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", addr, err)
	}
	out := map[string]nodeEntry{}
	for line := range strings.Lines(raw) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		e := nodeEntry{role: "master", failing: slices.Contains(flags, "fail") || slices.Contains(flags, "fail?"),
			handshake: slices.Contains(flags, "handshake") || slices.Contains(flags, "noaddr")}
		if slices.Contains(flags, "slave") {
			e.role, e.master = "replica", f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				e.migrating = true
				continue
			}
			lo, hi, found := strings.Cut(s, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("CLUSTER NODES on %s: slot %q", addr, s)
			}
			e.slots = append(e.slots, SlotRange{a, b})
		}
		out[f[0]] = e
	}
	return out, nil
}

func serves(ranges []SlotRange, slot int) bool {
	return slices.ContainsFunc(ranges, func(r SlotRange) bool { return r.Contains(slot) })
}
