--[[ schedule_fire: record that a firer fired a schedule's tick (or
skipped missed ticks) and move the schedule on to its next tick.

A firer reads the schedule (generation, next tick), submits the tick's
run, whose id is derived from the schedule's name and the tick's label
(its wall-clock time), and then calls this. Cron arithmetic happens in
the firer, so this step compares and sets: it moves the schedule only
from the next tick the firer read (due time and label: two wall-clock
ticks a daylight-saving change skipped are due at the same instant), and
only for the generation (definition) it read. Firers race freely: the
run id makes their submits one run, and the first advance wins; the
others hear that their own tick's advance is already done (2), or that
the schedule moved on (-51) or changed (-50), and read it again.

KEYS[1] the schedule's hash
KEYS[2] the schedule index (zset: name -> ms of its next tick)

ARGV[1]  name
ARGV[2]  generation the firer read
ARGV[3]  next tick's due time the firer read (ms)
ARGV[4]  next tick's label the firer read ("" for a schedule stored
         without one)
ARGV[5]  due time of the tick fired (ms); "" when none was: missed ticks
         skipped, or the schedule could not fire (ARGV[11] says why)
ARGV[6]  label of the tick fired ("" when none)
ARGV[7]  the next tick's due time after this step (ms)
ARGV[8]  the next tick's label after this step
ARGV[9]  the fired tick's run id ("" when none)
ARGV[10] outcome, a short text for people ("created", "existed",
         "skipped: thread t busy", "skipped missed ticks", ...)
ARGV[11] error to report on the schedule ("" clears it): a stored
         definition that no longer validates; the schedule stays

Returns
  {1, next}   moved on to next
  {2, next}   already moved on by this same step (a retry after a lost
              reply, or another firer of the same tick): no change
  -1          no such schedule (deleted)
  -50         the schedule's generation is not ARGV[2]: it was replaced
  -51         its next tick is not ARGV[3], ARGV[4]: another firer moved
              it on
]]
local rcall = redis.call
--@include clock
local schedKey, indexKey = KEYS[1], KEYS[2]
local name, gen, expected, expTick = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local fired, firedTick, nextMS, nextTick = ARGV[5], ARGV[6], ARGV[7], ARGV[8]

local cur = rcall('HMGET', schedKey, 'gen', 'next', 'tick', 'last', 'last_tick')
if not cur[1] then return -1 end
if cur[1] ~= gen then return -50 end
local curTick = cur[3] or ''
local atExpected = cur[2] == expected and curTick == expTick
if not atExpected and cur[2] == nextMS and curTick == nextTick and
    (fired == '' or (cur[4] == fired and (cur[5] or '') == firedTick)) then
  return {2, tonumber(nextMS)}
end
if not atExpected then return -51 end

local h = {'next', nextMS, 'tick', nextTick, 'checked_at', nowS, 'outcome', ARGV[10]}
if fired ~= '' then
  h[#h + 1], h[#h + 2] = 'last', fired
  h[#h + 1], h[#h + 2] = 'last_tick', firedTick
  h[#h + 1], h[#h + 2] = 'last_run', ARGV[9]
  h[#h + 1], h[#h + 2] = 'fired_at', nowS
end
rcall('HSET', schedKey, unpack(h))
if ARGV[11] ~= '' then
  rcall('HSET', schedKey, 'error', ARGV[11])
else
  rcall('HDEL', schedKey, 'error')
end
rcall('ZADD', indexKey, nextMS, name)
return {1, tonumber(nextMS)}
