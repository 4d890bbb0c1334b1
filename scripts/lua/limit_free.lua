--[[ limit_free: on a Redis Cluster, free the slot a claim holds under one
limit key and hand free slots to the first waiters, in the limit's own
slot (fence/limitcluster.go). The ending script (commit, fail, release,
park, an expiry) ends the claim on the node's slot first; a crash between
the two leaves a holder that runs out at its deadline.

Only a holder naming the claim is freed: a stale owner's late free, or a
replay of a free (a lost reply), frees nothing. With claim "" only a slot
handed to the node as a woken waiter goes: the node ended before it
claimed it (a cancel). Free slots (a holder that ran out, a lowered
limit) go to the first waiters either way.

KEYS[1] holders hash ("{lim/KEY}:h")
KEYS[2] waiters zset ("{lim/KEY}:w")

ARGV[1] node ref
ARGV[2] claim id, or "" for a handed slot only
ARGV[3] the node's queue: its entry among the waiters goes too

Returns
  {1, freed, {woken...}}  freed is 1 when this call freed the ref's slot;
         woken lists "ref|queue" of waiters handed a slot, for the caller
         to enqueue
]]
local rcall = redis.call
local hKey, wKey = KEYS[1], KEYS[2]
local ref, claim, queue = ARGV[1], ARGV[2], ARGV[3]
--@include clock
--@include limits
--@include held

local freed = 0
local who = heldBy(rcall('HGET', hKey, ref))
if who and (who == claim or (claim == '' and who == 'r:')) then
  rcall('HDEL', hKey, ref)
  freed = 1
end
rcall('ZREM', wKey, ref .. '|' .. queue)
local wakes = {}
local conc = tonumber(rcall('HGET', hKey, '~c')) or 0
if conc > 0 and rcall('ZCARD', wKey) > 0 then
  handOn(hKey, wKey, conc - purgeHeld(hKey), now, wakes, ref)
end
return {1, freed, wakes}
