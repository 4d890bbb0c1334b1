--[[ limit_extend: on a Redis Cluster, extend the deadline of the slot a
claim holds under one limit key, in the limit's own slot
(fence/limitcluster.go). A heartbeat calls it before it renews the lease
on the node's slot, and renews the lease only if every limit answered 1,
so a lease never outlives its slots: a claim whose holder ran out (its
worker was paused past the deadline) or moved to a takeover loses its
lease instead.

KEYS[1] holders hash ("{lim/KEY}:h")

ARGV[1] node ref
ARGV[2] claim id
ARGV[3] hold, ms: the new deadline is now + hold

Returns
  {1, 1}  extended
  {1, 0}  the limit holds no slots (no concurrency): nothing to extend
  {2}     lost: no live holder of this claim (it ran out, was freed, or
          a takeover moved it)
]]
local rcall = redis.call
local hKey = KEYS[1]
local ref, claim, hold = ARGV[1], ARGV[2], tonumber(ARGV[3])
--@include clock
--@include held

local who, dl = heldBy(rcall('HGET', hKey, ref))
if who == claim and dl >= now then
  rcall('HSET', hKey, ref, claim .. '@' .. int(now + hold))
  return {1, 1}
end
if not who and (tonumber(rcall('HGET', hKey, '~c')) or 0) == 0 then return {1, 0} end
return {2}
