--[[ store_unindex: drop index entries of store namespaces a reader found
with no items, unless a put indexed them within the grace (the put may
be between its two steps: store_index.lua, then store_put.lua).

KEYS[1] the index (zset of namespaces)
KEYS[2] when each namespace was last indexed (hash: namespace -> ms)

ARGV[1] grace, ms
ARGV[2..] namespaces, labels joined by "."

Returns
  {n}   n entries dropped
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
local grace = tonumber(ARGV[1])
local dropped = 0
for i = 2, #ARGV do
  local seen = tonumber(rcall('HGET', seenKey, ARGV[i]))
  if seen == nil or seen < now - grace then
    dropped = dropped + rcall('ZREM', indexKey, ARGV[i])
    rcall('HDEL', seenKey, ARGV[i])
  end
end
return {dropped}
