--[[ cancel: cancel a run.

Sets the run's cancel flag. BLOCKED and READY nodes become CANCELLED at once;
RUNNING nodes learn it from their next heartbeat and end CANCELLED when their
owner stops (fail.lua, release.lua) or their lease expires.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[5..] every node hash of the run, in the order of ARGV[5..]

ARGV[1]   reason
ARGV[2]   who asked (recorded as the event's worker)
ARGV[3]   ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[4]   event stream MAXLEN (approximate)
ARGV[5..] node ids

Returns
  {1, run_status, running}  cancelled; running nodes still finishing
  {2, run_status, running}  the run was already cancelled (no change)
  -1   run missing
  -22  the run already finished
]]
local rcall = redis.call
local runKey, evKey, readyKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local reason, who, refPrefix, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local r = rcall('HMGET', runKey, 'status', 'cancel', 'total')
if not r[1] then return -1 end
local running = 0
if r[2] == '1' then
  for i = 5, #KEYS do
    if rcall('HGET', KEYS[i], 'state') == 'RUNNING' then running = running + 1 end
  end
  return {2, r[1], running}
end
if r[1] ~= 'RUNNING' and r[1] ~= 'PENDING' then return -22 end

local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
rcall('HSET', runKey, 'cancel', 1, 'cancel_reason', reason, 'updated_at', now)
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'cancel_requested',
  'node', '', 'epoch', 0, 'worker', who, 'at', now, 'reason', reason)
local ended = 0
for i = 5, #KEYS do
  local s = rcall('HGET', KEYS[i], 'state')
  if s == 'BLOCKED' or s == 'READY' then
    local id = ARGV[i]
    rcall('HSET', KEYS[i], 'state', 'CANCELLED', 'error', 'run cancelled: ' .. reason,
      'finished_at', now, 'updated_at', now)
    rcall('ZREM', readyKey, refPrefix .. id)
    rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'cancelled',
      'node', id, 'epoch', 0, 'worker', who, 'at', now, 'reason', reason)
    ended = ended + 1
  elseif s == 'RUNNING' then
    running = running + 1
  end
end
local terminal = rcall('HINCRBY', runKey, 'terminal', ended)
local status = r[1]
if terminal >= tonumber(r[3]) then
  status = 'CANCELLED'
  rcall('HSET', runKey, 'status', status, 'finished_at', now)
  rcall('ZADD', finKey, now, refPrefix)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'run_finished',
    'node', '', 'epoch', 0, 'worker', who, 'at', now, 'status', status)
end
return {1, status, running}
