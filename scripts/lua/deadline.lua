--[[ deadline: arm a run's timeout (the spec's run-level "timeout").

The deadline is the run's start (start_at, which submit.lua stored on
Redis's clock: the submit, or its start_at/start_in) plus the timeout; it
is stored on the run and indexed for the sweep (timeout.lua cancels what is
left of the run when it passes). Submit arms it after its script; a submit
retried after a lost reply arms it again, to the same deadline: a deadline
stored already is kept. A run that has ended gets none.

KEYS[1]   run hash
KEYS[2]   deadlines index (zset: "thread:run:" -> deadline ms)

ARGV[1]   timeout, ms (> 0)
ARGV[2]   the timeout as the spec gave it ("10m"), for the cancel's reason
ARGV[3]   the run's member of the deadlines index ("thread:run:")

Returns
  {1, deadline_ms}   armed (or armed before: the stored deadline)
  {0}                the run has ended: nothing to arm
  -1                 no such run
]]
local rcall = redis.call
local runKey, idxKey = KEYS[1], KEYS[2]
local r = rcall('HMGET', runKey, 'status', 'start_at', 'created_at', 'deadline_at')
if not r[1] then return -1 end
if r[4] then return {1, tonumber(r[4])} end
if r[1] ~= 'RUNNING' and r[1] ~= 'QUEUED' then return {0} end
local start = tonumber(r[2]) or tonumber(r[3]) or 0
local deadline = start + tonumber(ARGV[1])
local deadlineS = string.format('%d', deadline)
rcall('HSET', runKey, 'deadline_at', deadlineS, 'timeout', ARGV[2])
rcall('ZADD', idxKey, deadlineS, ARGV[3])
return {1, deadline}
