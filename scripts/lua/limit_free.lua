--[[ limit_free: on a Redis Cluster, free the slot a claim holds under one
limit key and hand free slots to the first waiters, in the limit's own
slot (fence/limitcluster.go). The ending script (commit, fail, release,
park, an expiry) ends the claim on the node's slot first; a crash between
the two leaves a holder that runs out at its deadline.

Only a holder naming the claim is freed: a stale owner's late free, or a
replay of a free (a lost reply), frees nothing. A give-back (ARGV[7])
puts back what the claim's take moved instead. With claim "" only a slot
handed to the node as a woken waiter goes: the node ended before it
claimed it (a cancel). Free slots (a holder that ran out, a lowered
limit) go to the first waiters either way.

The end of an attempt that reported its cost (Task.Spend, "::spend N")
passes, for a limit the node named with a cost, the difference from the
cost its claim took: charged to the rate (or refunded, never past idle)
on this master's clock, as commit.lua charges it on a single server
(lib/limits.lua chargeRate). The caller passes it once per end, never
for a replayed commit.

KEYS[1] holders hash ("{lim/KEY}:h")
KEYS[2] waiters zset ("{lim/KEY}:w")
KEYS[3] rate state ("{lim/KEY}:t")

ARGV[1] node ref
ARGV[2] claim id, or "" for a handed slot only
ARGV[3] the node's queue: its entry among the waiters goes too
ARGV[4] cost to charge (below zero: refund), "" or 0 for none
ARGV[5] the limit's rate (claims or units per period), with ARGV[4]
ARGV[6] the rate's period, ms, with ARGV[4]
ARGV[7] "1": a give-back of a claim that did not happen: a holder the
        claim's take moved (a takeover's, a handed slot) is put back as
        it was, not deleted; "2": the same, the node waiting under a
        later key, and a slot handed to it is kept for it past the
        sweeper's next recheck (lib/limits.lua keepHanded); "" for the
        end of a claim

Returns
  {1, freed, {woken...}}  freed is 1 when this call freed the ref's slot;
         woken lists "ref|queue" of waiters handed a slot, for the caller
         to enqueue
]]
local rcall = redis.call
local hKey, wKey, tKey = KEYS[1], KEYS[2], KEYS[3]
local ref, claim, queue = ARGV[1], ARGV[2], ARGV[3]
local delta, rate, period = tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 0
--@include clock
--@include limits
--@include held

local freed = 0
local cur = rcall('HGET', hKey, ref)
local who = heldBy(cur)
if who and (who == claim or (claim == '' and who == 'r:')) then
  local moved = movedFrom(cur)
  if (ARGV[7] == '1' or ARGV[7] == '2') and moved then
    -- The take moved a live owner's holder (or a handed slot) to this
    -- claim, which then was refused: the owner keeps its slot.
    local q = string.match(moved, '^r:%d+|(.*)$')
    if ARGV[7] == '2' and q then moved = 'r:' .. int(now + limitRecheckMS + limitHoldMS) .. '|' .. q end
    rcall('HSET', hKey, ref, moved)
  else
    rcall('HDEL', hKey, ref)
    freed = 1
  end
end
rcall('ZREM', wKey, ref .. '|' .. queue)
if delta ~= 0 and rate > 0 and period > 0 then chargeRate(tKey, delta, period / rate, now) end
local wakes = {}
local conc = tonumber(rcall('HGET', hKey, '~c')) or 0
if conc > 0 and rcall('ZCARD', wKey) > 0 then
  handOn(hKey, wKey, conc - purgeHeld(hKey), now, wakes, ref)
end
return {1, freed, wakes}
