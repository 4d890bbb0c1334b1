--[[ store_put: put or delete items of one store namespace (LangGraph's
BaseStore put and delete).

A namespace's items are one hash, field = the item's key, value =
"created updated ttl expires json": created and updated are ms (Redis
time), ttl the item's time to live in ms (0: none), expires the ms it
expires (0: never), json the item's value as its writer encoded it. A put
keeps the item's created time and sets the rest; a delete removes it.
Putting the same value again stores the same item (only updated moves),
and deleting twice deletes once: a retry after a lost reply is safe.
Items past their expiry are pruned first (lib/item_prune).

The caller put the namespace in the index (store_index.lua) before this
step: a namespace that holds items is always listed.

KEYS[1] the namespace's items hash
KEYS[2] the namespace's expiries (zset: key -> ms it expires)

ARGV[1..] triples: key, value (JSON text; "" deletes the item), ttl in
          ms ("0": the item never expires)

Returns
  {n}   n items live in the namespace after the writes
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

for i = 1, #ARGV, 3 do
  local key, value, ttl = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]) or 0
  if value == '' then
    rcall('HDEL', itemsKey, key)
    rcall('ZREM', ttlKey, key)
  else
    local created = nowS
    local old = rcall('HGET', itemsKey, key)
    if old then created = string.match(old, '^(%d+) ') or nowS end
    local expires = '0'
    if ttl > 0 then
      expires = int(now + ttl)
      rcall('ZADD', ttlKey, expires, key)
    else
      rcall('ZREM', ttlKey, key)
    end
    rcall('HSET', itemsKey, key, created .. ' ' .. nowS .. ' ' .. int(ttl) .. ' ' .. expires .. ' ' .. value)
  end
end
return {rcall('HLEN', itemsKey)}
