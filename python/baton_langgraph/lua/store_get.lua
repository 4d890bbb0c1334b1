--[[ store_get: read items of one store namespace by key (LangGraph's
BaseStore get), pruning expired items first (lib/item_prune), and
restarting the time to live of each item read that has one when asked
(refresh_ttl): its expiry becomes now + its ttl. With no key it only
prunes and counts, which is how a listing tells a namespace with live
items from an index entry whose items are gone.

Items are stored as store_put.lua says: "created updated ttl expires json".

KEYS[1] the namespace's items hash
KEYS[2] the namespace's expiries (zset: key -> ms it expires)

ARGV[1] "1" to restart the ttl of the items read, "0" not to
ARGV[2..] keys

Returns
  {now, n, item...}   now: Redis time (ms); n: items live in the
                      namespace; then each key's item as stored, or nil
                      when it has none
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
local itemsKey, ttlKey = KEYS[1], KEYS[2]
-- item_prune: drop a store namespace's items whose time to live has
-- passed (at most 100 a call, so a script stays short), before a script
-- reads or writes the namespace. A script includes it after clock, with
-- itemsKey (the namespace's hash) and ttlKey (its zset: key -> ms the
-- item expires) defined.
local function pruneItems()
  local gone = rcall('ZRANGEBYSCORE', ttlKey, '-inf', nowS, 'LIMIT', 0, 100)
  if #gone > 0 then
    rcall('HDEL', itemsKey, unpack(gone))
    rcall('ZREM', ttlKey, unpack(gone))
  end
end
pruneItems()

local refresh = ARGV[1] == '1'
local out = {now, rcall('HLEN', itemsKey)}
for i = 2, #ARGV do
  local key = ARGV[i]
  local item = rcall('HGET', itemsKey, key)
  if item and refresh then
    local c, u, ttl, rest = string.match(item, '^(%d+) (%d+) (%d+) %d+ (.*)$')
    if c and tonumber(ttl) > 0 then
      local expires = int(now + tonumber(ttl))
      item = c .. ' ' .. u .. ' ' .. ttl .. ' ' .. expires .. ' ' .. rest
      rcall('HSET', itemsKey, key, item)
      rcall('ZADD', ttlKey, expires, key)
    end
  end
  out[#out + 1] = item
end
return out
