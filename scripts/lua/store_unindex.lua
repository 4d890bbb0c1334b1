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
--@include clock
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
