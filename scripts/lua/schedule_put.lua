--[[ schedule_put: store a schedule, or replace its definition.

A schedule is a hash beside an index of every schedule by its next tick.
The caller validated the definition and computed the first tick after
now, as it read Redis's TIME; this step stores both. The same definition
again is a no-op that answers as the first put did (a retry after a lost
reply): the next tick and the history stay. Another definition bumps the
generation, so a firer that read the old one cannot advance the new one
(schedule_fire.lua answers -50), takes the new next tick and clears the
reported error; the last tick, its run and outcome stay, as history.

KEYS[1] the schedule's hash
KEYS[2] the schedule index (zset: name -> ms of its next tick)

ARGV[1] name
ARGV[2] definition (JSON text, compared verbatim)
ARGV[3] next tick's due time, ms since the epoch (Redis time)
ARGV[4] next tick's label: the wall-clock time that names its run
        (20261101T013000), which the firer compares and fires

Returns
  {1, gen, next}   stored: created or replaced; gen its generation
  {2, gen, next}   the same definition was stored already: no change
]]
local rcall = redis.call
--@include clock
local schedKey, indexKey = KEYS[1], KEYS[2]
local name, def, nextMS, tick = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local cur = rcall('HMGET', schedKey, 'def', 'gen', 'next')
if cur[1] == def then
  return {2, tonumber(cur[2]) or 0, tonumber(cur[3]) or 0}
end
local gen = rcall('HINCRBY', schedKey, 'gen', 1)
rcall('HSET', schedKey, 'name', name, 'def', def, 'next', nextMS, 'tick', tick, 'updated_at', nowS)
if not cur[1] then rcall('HSET', schedKey, 'created_at', nowS) end
rcall('HDEL', schedKey, 'error')
rcall('ZADD', indexKey, nextMS, name)
return {1, gen, tonumber(nextMS)}
