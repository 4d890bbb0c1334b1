package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/internal/delivery"
	"github.com/batonrun/baton/scripts/lua"
)

// rtCounter is a go-redis hook that counts round trips (a command sent on
// its own is one, a pipeline is one) and commands by name, scripts by what
// they do.
type rtCounter struct {
	scripts map[string]string // sha1 -> name; read-only after newRTCounter

	mu         sync.Mutex
	rtts, cmds int64
	byName     map[string]int64
	rtByName   map[string]int64 // round trips that carried the command at least once
}

// asynqScripts names asynq v0.26.0's scripts by SHA1 (internal/rdb/rdb.go);
// another version's show as "asynq/<sha>".
var asynqScripts = map[string]string{
	"98d28b42650870a743450ffda9791e9e19c6991b": "enqueue",
	"a8153319360adc71cdc370107f8ab9786f204765": "dequeue",
	"1241eaa1c73409baaf1fea0c08d203a4911bda15": "done",
	"a2631c71357a54b4c3e7450b1757e7f3f49d6c81": "doneUnique",
	"117dca952700588e559c7ace20b925096d587974": "markAsComplete",
	"f34cbfd11d1fc8019af55b50c447fc68eb8b29e5": "requeue",
	"8ce6b38a99b73194585c251eb3c2a89559f37a87": "schedule",
	"65fa409c88198a681c53e0892d8276eca0145694": "retry",
	"9c3b1eb9947ce2ee5304ac013a0a365ec364fd2d": "archive",
	"522b1a6ae66fe79ea2f24a9af58798ab71879035": "forward",
	"49c4326d80c1db9c476da2aa7f4438d03688f82b": "deleteExpiredCompletedTasks",
	"16988a462595f6ee317be300951533b004f27f5c": "listLeaseExpired",
	"3c8548ad44d0dfcfde50f07ea9271d77f656042c": "writeServerState",
	"79cf8dbc80deca37314fdfdeb9fe33a12c9baad7": "clearServerState",
}

func newRTCounter() *rtCounter {
	c := &rtCounter{byName: map[string]int64{}, rtByName: map[string]int64{}, scripts: map[string]string{}}
	for sha, name := range asynqScripts {
		c.scripts[sha] = "asynq:" + name
	}
	for _, name := range lua.Names() {
		src, _ := lua.Source(name) // as Redis runs it, includes expanded
		c.scripts[sha1Hex(src)] = "baton:" + name
	}
	// baton's nodes go on Asynq's queues through a script of its own.
	c.scripts[sha1Hex(delivery.EnqueueScript())] = "baton:enqueue"
	return c
}

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (c *rtCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *rtCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := c.label(cmd)
		c.mu.Lock()
		c.rtts++
		c.cmds++
		c.byName[name]++
		c.rtByName[name]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (c *rtCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		c.rtts++
		c.cmds += int64(len(cmds))
		seen := map[string]bool{}
		for _, cmd := range cmds {
			name := c.label(cmd)
			c.byName[name]++
			if !seen[name] {
				seen[name] = true
				c.rtByName[name]++
			}
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// label names a command; a script call is named by its script.
func (c *rtCounter) label(cmd redis.Cmder) string {
	name := cmd.Name()
	args := cmd.Args()
	if (name != "evalsha" && name != "eval") || len(args) < 2 {
		return name
	}
	sha, _ := args[1].(string)
	if name == "eval" {
		sha = sha1Hex(sha)
	}
	if s, ok := c.scripts[sha]; ok {
		return name + " " + s
	}
	return name + " " + sha[:min(8, len(sha))]
}

// counts is a snapshot of the counter.
type counts struct {
	rtts, cmds int64
	byName     map[string]int64
	rtByName   map[string]int64
}

func (c *rtCounter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return counts{rtts: c.rtts, cmds: c.cmds, byName: maps.Clone(c.byName), rtByName: maps.Clone(c.rtByName)}
}

// since is what was counted between earlier and c.
func (c counts) since(earlier counts) counts {
	d := counts{rtts: c.rtts - earlier.rtts, cmds: c.cmds - earlier.cmds, byName: map[string]int64{}, rtByName: map[string]int64{}}
	for k, v := range c.byName {
		if v -= earlier.byName[k]; v != 0 {
			d.byName[k] = v
		}
	}
	for k, v := range c.rtByName {
		if v -= earlier.rtByName[k]; v != 0 {
			d.rtByName[k] = v
		}
	}
	return d
}
