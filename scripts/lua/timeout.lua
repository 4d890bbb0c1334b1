--[[ timeout: cancel what is left of a run whose deadline (stored by submit.lua)
has passed, on Redis's clock, in the step that checks it.

Called by the sweep for each member of the deadlines index due by its
read; the index is a trigger, this script decides. The run's deadline is
read from the run hash and compared with Redis TIME here: a deadline not
due yet is put back in the index at its stored time and nothing else
changes. A due one cancels the run as cancel.lua does (lib/cancel_run.lua:
BLOCKED, READY and WAITING nodes CANCELLED at once, RUNNING ones pushed
and flagged), with the reason "timeout <spec timeout> passed", and the
deadline leaves the run and the index: a retried run runs without one.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[5]   the run's thread's queue (list of waiting run ids)
KEYS[6]   deadlines index (zset: "thread:run:" -> deadline ms)
KEYS[7..] every node hash of the run, in the order of ARGV[6..]

ARGV[1]   who (recorded as the event's worker)
ARGV[2]   ref prefix "thread:run:", the run's member of the index
ARGV[3]   event stream MAXLEN (approximate)
ARGV[4]   Pub/Sub channel of the cancel push, or "" for none
ARGV[5]   the run id
ARGV[6..] node ids

Returns
  {1, run_status, running}  cancelled; running nodes still finishing
  {0, deadline_ms}          not due yet (or no deadline: 0); nothing changed
  -1                        no such run (its index entry is dropped)
  -22                       the run had ended (its index entry is dropped)
]]
local rcall = redis.call
local runKey, evKey, readyKey, finKey, queueKey, idxKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local who, refPrefix, maxlen, runID = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
--@include cancel_run

local r = rcall('HMGET', runKey, 'deadline_at', 'timeout', 'status')
if not r[3] then
  rcall('ZREM', idxKey, refPrefix)
  return -1
end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = tonumber(r[1])
if not deadline then
  rcall('ZREM', idxKey, refPrefix)
  return {0, 0}
end
if deadline > now then
  rcall('ZADD', idxKey, r[1], refPrefix)
  return {0, deadline}
end
rcall('ZREM', idxKey, refPrefix)
rcall('HDEL', runKey, 'deadline_at')
local nodes, ids = {}, {}
for i = 7, #KEYS do
  nodes[#nodes + 1] = KEYS[i]
  ids[#ids + 1] = ARGV[i - 1]
end
local queued = r[3] == 'QUEUED'
local did, status, running = cancelRun({run = runKey, ev = evKey, ready = readyKey, fin = finKey,
  prefix = refPrefix, id = runID, nodes = nodes, ids = ids, reason = 'timeout ' .. (r[2] or '') .. ' passed',
  who = who, channel = ARGV[4], now = now})
if did == 'missing' then return -1 end
if did == 'finished' then return -22 end
if queued then rcall('LREM', queueKey, 0, runID) end
return {1, status, running}
