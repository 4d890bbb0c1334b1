--[[ limit_extend: on a Redis Cluster, extend the deadline of the slot a
claim holds under one limit key, in the limit's own slot
(fence/limitcluster.go). A heartbeat calls it before it renews the lease
on the node's slot, and renews the lease only if every limit answered 1,
so a lease never outlives its slots.

A claim whose holder ran out (its worker was paused past the deadline)
gets a slot again only if one is free and nobody waits for it; a claim
whose holder a takeover moved, or that finds the key full, has lost it.
A limit that took no slot for the claim (one without concurrency, or
deleted before the claim) has nothing to extend, as long as it still
has no concurrency, or room.

KEYS[1] holders hash ("{lim/KEY}:h")
KEYS[2] waiters zset ("{lim/KEY}:w")

ARGV[1] node ref
ARGV[2] claim id
ARGV[3] hold, ms: the new deadline is now + hold

Returns
  {1, 1}  extended (or taken again: a slot was free)
  {1, 0}  the limit holds no slots (no concurrency): nothing to extend
  {2}     lost: another claim holds the node's slot (a takeover), or the
          claim's holder is gone and no slot is free
]]
local rcall = redis.call
local hKey, wKey = KEYS[1], KEYS[2]
local ref, claim, hold = ARGV[1], ARGV[2], tonumber(ARGV[3])
--@include clock
--@include held

local who, dl = heldBy(rcall('HGET', hKey, ref))
if who == claim and dl >= now then
  rcall('HSET', hKey, ref, claim .. '@' .. int(now + hold))
  return {1, 1}
end
if who and who ~= claim and who ~= 'r:' and dl >= now then return {2} end
local conc = tonumber(rcall('HGET', hKey, '~c')) or 0
if conc == 0 then return {1, 0} end
if rcall('ZCARD', wKey) == 0 and purgeHeld(hKey) < conc then
  rcall('HSET', hKey, ref, claim .. '@' .. int(now + hold))
  return {1, 1}
end
return {2}
