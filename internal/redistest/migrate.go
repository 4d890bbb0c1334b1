package redistest

import (
	"context"
	"fmt"
	"strings"
)

// MigrateOptions shapes one slot migration.
type MigrateOptions struct {
	// Batch is how many keys one MIGRATE moves; 0 means 10.
	Batch int
	// AfterBatch, if set, runs once the slot is marked importing and
	// migrating (moved 0) and after every batch, while the slot is half
	// moved: a command for a moved key then gets ASK from the source. An
	// error stops the migration midway and is returned.
	AfterBatch func(ctx context.Context, moved int) error
}

// MigrateSlot moves slot from the master serving it to the master at
// toAddr the way redis-cli --cluster reshard does, step by step:
// CLUSTER SETSLOT IMPORTING on the target, MIGRATING on the source, MIGRATE
// of the slot's keys in batches, then SETSLOT NODE on the target, the
// source and every other master. Clients see ASK while keys move and MOVED
// afterwards. It returns once the cluster is healthy with the target
// serving the slot.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, toAddr string, opts *MigrateOptions) error {
	if opts == nil {
		opts = &MigrateOptions{}
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 10
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	var from ClusterNode
	var masters []ClusterNode
	for _, n := range nodes {
		if n.Alive && n.Role == "master" {
			masters = append(masters, n)
			if serves(n.Slots, slot) {
				from = n
			}
		}
	}
	to := c.ids[toAddr]
	switch {
	case to == "":
		return fmt.Errorf("redistest: %s is no node of this cluster", toAddr)
	case from.Addr == "":
		return fmt.Errorf("redistest: no live master serves slot %d", slot)
	case from.Addr == toAddr:
		return fmt.Errorf("redistest: %s already serves slot %d", toAddr, slot)
	}
	src, dst := c.node(from.Addr), c.node(toAddr)
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", from.ID).Err(); err != nil {
		return fmt.Errorf("SETSLOT %d IMPORTING on %s: %w", slot, toAddr, err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", to).Err(); err != nil {
		return fmt.Errorf("SETSLOT %d MIGRATING on %s: %w", slot, from.Addr, err)
	}
	host, port, _ := strings.Cut(toAddr, ":")
	moved := 0
	for {
		if opts.AfterBatch != nil {
			if err := opts.AfterBatch(ctx, moved); err != nil {
				return err
			}
		}
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		if err != nil {
			return fmt.Errorf("GETKEYSINSLOT %d on %s: %w", slot, from.Addr, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000}
		if c.opts.Password != "" {
			args = append(args, "AUTH", c.opts.Password)
		}
		args = append(args, "KEYS")
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("MIGRATE %d keys of slot %d to %s: %w", len(keys), slot, toAddr, err)
		}
		moved += len(keys)
	}
	// Target first: once the source gives the slot up, clients it sends
	// with MOVED must find the target already owning it.
	order := []string{toAddr, from.Addr}
	for _, m := range masters {
		if m.Addr != toAddr && m.Addr != from.Addr {
			order = append(order, m.Addr)
		}
	}
	for _, addr := range order {
		if err := c.node(addr).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", to).Err(); err != nil {
			return fmt.Errorf("SETSLOT %d NODE on %s: %w", slot, addr, err)
		}
	}
	return c.poll(ctx, func(ctx context.Context) error {
		view, err := c.view(ctx, toAddr)
		if err != nil {
			return err
		}
		if !serves(view[to].slots, slot) {
			return fmt.Errorf("%s does not serve slot %d yet", toAddr, slot)
		}
		return c.healthy(ctx)
	})
}

// SlotOwner returns the address of the live master serving slot.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (string, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		if n.Alive && n.Role == "master" && serves(n.Slots, slot) {
			return n.Addr, nil
		}
	}
	return "", fmt.Errorf("redistest: no live master serves slot %d", slot)
}
