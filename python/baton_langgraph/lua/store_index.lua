--[[ store_index: list store namespaces in the index of namespaces, the
step before a put writes their items (store_put.lua).

The index is another Redis Cluster slot than the namespaces' items, so a
put is two scripts, index first: a put cut between the two leaves an
index entry with no items, which readers skip (and store_unindex.lua
drops later), never items that no listing finds. Each entry's time of
last indexing is kept, so that a reader drops only entries no put has
touched for a while.

KEYS[1] the index (zset, every score 0: namespaces in lexical order,
        labels joined by ".")
KEYS[2] when each namespace was last indexed (hash: namespace -> ms)

ARGV[1..] namespaces, labels joined by "."

Returns
  {n}   n namespaces listed that were not before
]]
local rcall = redis.call
-- clock: Redis's time, read once, for the scripts on a node's path (submit,
-- claim, heartbeat, commit). A script includes it after defining rcall.
--
-- now is the time in ms, for arithmetic; nowS is the same time as text,
-- for the commands that store it. Redis 7.0 turns every Lua number handed
-- to redis.call into text with snprintf("%.17g"), about 3,000 instructions
-- each (callgrind); int's "%d" costs a fraction of that. So these scripts
-- hand redis.call text, each number formatted once.
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function int(n) return string.format('%d', n) end
local nowS = int(now)
local indexKey, seenKey = KEYS[1], KEYS[2]
local added = 0
for i = 1, #ARGV do
  added = added + rcall('ZADD', indexKey, 0, ARGV[i])
  rcall('HSET', seenKey, ARGV[i], nowS)
end
return {added}
