--[[ schedule_rm: delete a schedule.

Its runs stay; a firer that read it before and fires now submits at most
the tick it read (the run id is the tick's) and then finds it gone
(schedule_fire.lua answers -1).

KEYS[1] the schedule's hash
KEYS[2] the schedule index (zset: name -> ms of its next tick)

ARGV[1] name

Returns
  1    deleted
  -1   no such schedule (nothing changed; also what a retry after a lost
       reply hears)
]]
local rcall = redis.call
local gone = rcall('DEL', KEYS[1])
rcall('ZREM', KEYS[2], ARGV[1])
if gone == 0 then return -1 end
return 1
