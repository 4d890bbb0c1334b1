--[[ limit_use: on a Redis Cluster, read what is in use under one limit
key, on the clock of the limit's own master (fence/limitstate.go): slots
held by a holder whose deadline has not passed, waiters, and the rate
state with that master's now. Changes nothing.

KEYS[1] holders hash ("{lim/KEY}:h")
KEYS[2] waiters zset ("{lim/KEY}:w")
KEYS[3] rate state ("{lim/KEY}:t")

Returns
  {in_use, waiting, tat, now_ms}  tat is "" without a rate state
]]
local rcall = redis.call
--@include clock
--@include held

local all = rcall('HGETALL', KEYS[1])
local n = 0
for i = 1, #all, 2 do
  if all[i] ~= '~c' then
    local _, dl = heldBy(all[i + 1])
    if dl >= now then n = n + 1 end
  end
end
return {n, rcall('ZCARD', KEYS[2]), rcall('GET', KEYS[3]) or '', nowS}
