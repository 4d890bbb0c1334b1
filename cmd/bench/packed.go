package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/scripts/lua"
)

// packBody replaces one retained run's keys by one string, packed by
// lib/pack.lua, with the run's time to live. KEYS[1] run hash, KEYS[2]
// event stream, KEYS[3] the packed key, KEYS[4..] node hashes. Returns the
// packed length, or 0 when the run hash has no time to live (not retained:
// nothing changed).
const packBody = `
local ttl = rcall('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
local packed = packRun(KEYS[1], {unpack(KEYS, 4)}, KEYS[2])
rcall('DEL', KEYS[1], KEYS[2])
for i = 4, #KEYS do rcall('DEL', KEYS[i]) end
rcall('SET', KEYS[3], packed, 'PX', ttl)
return #packed
`

// packRuns stores each of runs finished runs tagged tag, of size nodes,
// as one packed string in place of its keys, and returns the packed
// strings' mean length. It measures the layout that issue 35's
// compaction would give a retained run; the runs are no longer readable
// through the store afterwards (the memory section flushes them).
func (b *bench) packRuns(ctx context.Context, tag string, runs, size int) (float64, error) {
	src, err := lua.FS.ReadFile("lib/pack.lua")
	if err != nil {
		return 0, err
	}
	script := redis.NewScript("local rcall = redis.call\n" + string(src) + packBody)
	keys := fence.Keys{}
	var total atomic.Int64
	err = parallel(ctx, runs, b.o.submitters, func(ctx context.Context, i int) error {
		id := runID(tag, i)
		ks := []string{keys.Run(id, id), keys.Events(id, id), keys.Packed(id, id)}
		for j := range size {
			ks = append(ks, keys.Node(id, id, fmt.Sprintf("n%d", j)))
		}
		n, err := script.Run(ctx, b.t.rdb, ks).Int64()
		if err != nil {
			return fmt.Errorf("pack %s: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("pack %s: the run has no time to live", id)
		}
		total.Add(n)
		return nil
	})
	return float64(total.Load()) / float64(runs), err
}
