--[[ cancel: cancel a run.

Sets the run's cancel flag. BLOCKED and READY nodes become CANCELLED at once.
When nodes are RUNNING, the script PUBLISHes the run on ARGV[5] in the same
atomic step, so whoever cancels (a Go client, the CLI, the HTTP API, another
language) pushes the cancel to the workers that own them; their heartbeat's
cancel flag is the fallback when a push is lost. RUNNING nodes end CANCELLED
when their owner stops (fail.lua, release.lua) or their lease expires. A
cancel of a cancelled run changes nothing but pushes again while nodes still
run.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[5..] every node hash of the run, in the order of ARGV[6..]

ARGV[1]   reason
ARGV[2]   who asked (recorded as the event's worker)
ARGV[3]   ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[4]   event stream MAXLEN (approximate)
ARGV[5]   Pub/Sub channel for the push, or "" for none; the message is the
          run id, followed by "~" and the run's incarnation when it has one
ARGV[6..] node ids

Returns
  {1, run_status, running}  cancelled; running nodes still finishing
  {2, run_status, running}  the run was already cancelled (no change)
  -1   run missing
  -22  the run already finished
]]
local rcall = redis.call
local runKey, evKey, readyKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local reason, who, refPrefix, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local channel = ARGV[5]

local r = rcall('HMGET', runKey, 'status', 'cancel', 'total', 'inc')
if not r[1] then return -1 end
--@include ref

-- push tells the owners of running nodes; only they have anything to stop.
local function push(n)
  if n == 0 or channel == '' or not runID then return end
  local msg = runID
  if r[4] and r[4] ~= '' then msg = msg .. '~' .. r[4] end
  rcall('PUBLISH', channel, msg)
end

local running = 0
if r[2] == '1' then
  for i = 5, #KEYS do
    if rcall('HGET', KEYS[i], 'state') == 'RUNNING' then running = running + 1 end
  end
  push(running)
  return {2, r[1], running}
end
if r[1] ~= 'RUNNING' and r[1] ~= 'QUEUED' then return -22 end

local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
rcall('HSET', runKey, 'cancel', 1, 'cancel_reason', reason)
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'cancel_requested',
  'node', '', 'epoch', 0, 'worker', who, 'at', now, 'reason', reason)
local ended = 0
for i = 5, #KEYS do
  local s = rcall('HGET', KEYS[i], 'state')
  if s == 'BLOCKED' or s == 'READY' then
    local id = ARGV[i + 1]
    rcall('HSET', KEYS[i], 'state', 'CANCELLED', 'error', 'run cancelled: ' .. reason,
      'finished_at', now)
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
push(running)
return {1, status, running}
