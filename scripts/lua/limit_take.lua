--[[ limit_take: on a Redis Cluster, take a slot and the rate cost of one
limit key for one claim of a node, in the limit's own slot
(fence/limitcluster.go; docs/flow-control.md, "Redis Cluster").

A claim of a node with limits on a cluster is: claim.lua on the node's
slot (which names the node's limits and its last claim id), this script
on each limit key in key order, then claim.lua again with the outcome.
The holder is keyed by the node's ref and records the claim id with a
deadline on this master's clock (lib/held.lua); the caller's lease never
ends after it, and its heartbeat extends it first (limit_extend.lua).

A call again with the same ref and claim id (its reply was lost) finds
its own holder and answers as the first time, taking nothing again. A
holder naming the node's last claim (ARGV[3]: a takeover of an expired
lease, or an end whose limit_free was lost) or a slot handed to the node
as a woken waiter becomes this claim's, keeping what it was
("claim@DEADLINE>MOVED", lib/held.lua) for a give-back to restore if the
claim does not happen. A handed slot is taken back instead (the node
waits again, at the head of the queue) while claims fill the concurrency
now passed: the limit was lowered after it was handed on. A holder of
another claim whose deadline has not passed is a claim of the same node
in flight: nothing is taken. A run-out holder counts for nothing and is
dropped.

KEYS[1] holders hash ("{lim/KEY}:h")
KEYS[2] waiters zset ("{lim/KEY}:w": "ref|queue" -> ms it began to wait)
KEYS[3] rate state ("{lim/KEY}:t": GCRA's TAT, ms)

ARGV[1] node ref
ARGV[2] claim id
ARGV[3] the node's last claim id, "" for none
ARGV[4] the node's queue
ARGV[5] hold, ms: the holder's deadline is now + hold
ARGV[6] concurrency, 0 for none
ARGV[7] rate, 0 for none
ARGV[8] rate period, ms
ARGV[9] burst
ARGV[10] cost the claim takes from the rate

Returns
  {1, {woken...}, held}  taken (or held already by this claim); woken
         lists "ref|queue" of waiters this call handed a free slot to, for
         the caller to enqueue; held is 1 when a holder names the claim now
         (a slot, or a takeover's moved under a limit without concurrency),
         for a give-back to find, else 0
  {2, {woken...}}  no free slot: the ref waits, first come first served
         (woken as above)
  {3, delay_ms}    the rate is spent for delay_ms more: nothing taken
  {4, left_ms}     another claim of this node holds the slot for left_ms
         more (a claim in flight): nothing taken
]]
local rcall = redis.call
local hKey, wKey, tKey = KEYS[1], KEYS[2], KEYS[3]
local ref, claim, prev, queue = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local hold, conc = tonumber(ARGV[5]), tonumber(ARGV[6])
local rate, period, burst, cost = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
--@include clock
--@include limits
--@include held

local move, who = false, nil
local mine = rcall('HGET', hKey, ref)
if mine then
  local dl
  who, dl = heldBy(mine)
  if who == claim then
    local moved = movedFrom(mine)
    rcall('HSET', hKey, ref, claim .. '@' .. int(now + hold) .. (moved and ('>' .. moved) or ''))
    return {1, {}, 1}
  end
  if who == 'r:' and dl >= now and conc > 0 then
    -- A slot handed on before the limit was lowered: taken back when
    -- the claims running fill the limit now (the node waits again, at
    -- the head of the queue).
    local running = 0
    local all = rcall('HGETALL', hKey)
    for i = 1, #all, 2 do
      local c, d = heldBy(all[i + 1])
      if all[i] ~= '~c' and c ~= 'r:' and d >= now then running = running + 1 end
    end
    if running >= conc then
      rcall('HDEL', hKey, ref)
      rcall('HSET', hKey, '~c', conc)
      waitFirst(wKey, ref .. '|' .. queue, now)
      return {2, {}}
    end
  end
  if who == 'r:' or (prev ~= '' and who == prev) then
    move = dl >= now or who == prev
  elseif dl >= now then
    return {4, dl - now}
  end
  if not move then rcall('HDEL', hKey, ref) end
end

local tat
if rate > 0 then
  -- GCRA, as claim.lua takes it on a single server (lib/limits.lua).
  local T = period / rate
  local cur = math.max(tonumber(rcall('GET', tKey)) or 0, now)
  local at = cur - burst * T
  if at > now then return {3, math.ceil(at - now)} end
  tat = cur + cost * T
end

local wakes = {}
local held = 0
rcall('HSET', hKey, '~c', conc)
if conc > 0 then
  local self = ref .. '|' .. queue
  if not move then
    local free = conc - purgeHeld(hKey)
    local rank = rcall('ZRANK', wKey, self)
    local ahead = rank or rcall('ZCARD', wKey)
    if ahead >= free then
      handOn(hKey, wKey, free, now, wakes, ref)
      if not rank then
        local last = rcall('ZRANGE', wKey, -1, -1, 'WITHSCORES')
        local score = now
        if last[2] and tonumber(last[2]) >= now then score = tonumber(last[2]) + 0.001 end
        rcall('ZADD', wKey, string.format('%.3f', score), self)
      end
      return {2, wakes}
    end
    handOn(hKey, wKey, ahead, now, wakes, ref)
  end
  local holder = claim .. '@' .. int(now + hold)
  if move then
    -- What was moved, for a give-back to restore (lib/held.lua); a
    -- holder that itself kept one keeps only its own.
    holder = holder .. '>' .. string.gsub(mine, '>.*$', '')
  end
  rcall('HSET', hKey, ref, holder)
  rcall('ZREM', wKey, self)
  held = 1
elseif move and who ~= 'r:' then
  -- No concurrency now (the limit deleted): the takeover still moves the
  -- holder, so that its end frees it.
  rcall('HSET', hKey, ref, claim .. '@' .. int(now + hold) .. '>' .. string.gsub(mine, '>.*$', ''))
  held = 1
elseif move then
  rcall('HDEL', hKey, ref)
end
if tat then rcall('SET', tKey, string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000) end
return {1, wakes, held}
