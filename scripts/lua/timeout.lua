--[[ timeout: cancel what is left of a run whose deadline (stored by submit.lua)
has passed, on Redis's clock, in the step that checks it.

Called by the sweep for each member of the deadlines index due by its
read; the index is a trigger, this script decides. The run's deadline is
read from the run hash and compared with Redis TIME here: a deadline not
due yet is put back in the index at its stored time and nothing else
changes. A due one cancels the run as cancel.lua does (lib/cancel_run.lua:
BLOCKED, READY and WAITING nodes CANCELLED at once, RUNNING ones pushed
and flagged; a slot handed to a READY node goes to the next waiter),
with the reason "timeout <spec timeout> passed", and the deadline leaves
the run and the index: a retried run runs without one. As for
cancel.lua, the limit keys of READY nodes with limits are needed: without
them nothing changes and -31 names them.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[5]   the run's thread's queue (list of waiting run ids)
KEYS[6]   deadlines index (zset: "thread:run:" -> deadline ms)
KEYS[7..] every node hash of the run, in the order of ARGV[6..]; then,
          per limit key of its READY nodes, its holders hash and waiters
          zset (lib/limits.lua); or, on a Redis Cluster, the run hash once
          more (as for cancel.lua)

ARGV[1]   who (recorded as the event's worker)
ARGV[2]   ref prefix "thread:run:", the run's member of the index
ARGV[3]   event stream MAXLEN (approximate)
ARGV[4]   Pub/Sub channel of the cancel push, or "" for none
ARGV[5]   the run id
ARGV[6..] node ids

Returns
  {1, run_status, running}  cancelled; running nodes still finishing; a
         trailing {woken...} ("ref|queue") lists the waiters handed the
         slots of cancelled nodes, for the caller to enqueue
  {0, deadline_ms}          not due yet (or no deadline: 0); nothing changed
  -1                        no such run (its index entry is dropped)
  -22                       the run had ended (its index entry is dropped)
  {-31, keys}  a READY node names limit keys ("k1,k2") whose keys were not
         passed: call again with them; nothing changed
]]
local rcall = redis.call
local runKey, evKey, readyKey, finKey, queueKey, idxKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local who, refPrefix, maxlen, runID = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
--@include limits
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
local nodes, ids = {}, {}
for i = 7, #ARGV + 1 do
  nodes[#nodes + 1] = KEYS[i]
  ids[#ids + 1] = ARGV[i - 1]
end
local queued = r[3] == 'QUEUED'
local did, status, running, wakes = cancelRun({run = runKey, ev = evKey, ready = readyKey, fin = finKey,
  prefix = refPrefix, id = runID, nodes = nodes, ids = ids, reason = 'timeout ' .. (r[2] or '') .. ' passed',
  who = who, channel = ARGV[4], now = now, lim = limitKeysFrom(#ARGV + 2) or {},
  limPartial = KEYS[#ARGV + 2] == runKey})
if did == 'limits' then return {-31, status} end
rcall('ZREM', idxKey, refPrefix)
rcall('HDEL', runKey, 'deadline_at')
if did == 'missing' then return -1 end
if did == 'finished' then return -22 end
if queued then rcall('LREM', queueKey, 0, runID) end
if wakes and #wakes > 0 then return {1, status, running, wakes} end
return {1, status, running}
