--[[ limit_conc: on a Redis Cluster, bring one limit key in line with a
limit just set or deleted, in the key's own slot (fence/limits.go
SetLimit, DeleteLimit; fence/limitcluster.go). The definitions live in
another slot: the caller stores them first, then calls this on every key
seen under the name, with the concurrency that now governs the key.

The key's frees hand slots on by the concurrency stored here (field "~c"
of its holders hash): from this call on, by the new limit. A raised limit
(or one without concurrency now) hands its free slots to the first
waiters at once, for the caller to enqueue; a lowered one takes no slot
away. A call again (a lost reply) changes nothing more.

KEYS[1] holders hash ("{lim/KEY}:h")
KEYS[2] waiters zset ("{lim/KEY}:w")

ARGV[1] the concurrency that governs the key now, 0 for none

Returns
  {1, {woken...}}  woken lists "ref|queue" of waiters handed a slot
]]
local rcall = redis.call
local hKey, wKey = KEYS[1], KEYS[2]
local conc = tonumber(ARGV[1]) or 0
--@include clock
--@include limits
--@include held

local wakes = {}
if conc > 0 then
  rcall('HSET', hKey, '~c', conc)
  handOn(hKey, wKey, conc - purgeHeld(hKey), now, wakes, '')
else
  if rcall('HEXISTS', hKey, '~c') == 1 then rcall('HSET', hKey, '~c', 0) end
  handOn(hKey, wKey, rcall('ZCARD', wKey), now, wakes, '')
end
return {1, wakes}
