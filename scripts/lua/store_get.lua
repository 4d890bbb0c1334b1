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
--@include clock
local itemsKey, ttlKey = KEYS[1], KEYS[2]
--@include item_prune
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
