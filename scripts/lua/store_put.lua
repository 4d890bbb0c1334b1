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
--@include clock
local itemsKey, ttlKey = KEYS[1], KEYS[2]
--@include item_prune
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
