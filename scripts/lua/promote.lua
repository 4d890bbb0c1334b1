--[[ promote: start the next queued run of a thread once its active run ended.

Called by whoever sees a thread's active run end (the worker whose write
ended it, the canceller, the sweeper): any number of times, by any number
of callers, concurrently. It acts only when the active run and the queue's
head are still what the caller read (else -23: read again) and the active
run has ended; then the head becomes the active run, RUNNING, and its
nodes without dependencies READY. A head that was cancelled while queued is
only taken off the queue (code 2): call again for the next.

KEYS[1]   the thread's active-run key
KEYS[2]   hash of the active run ARGV[1] names (any key of the thread when none)
KEYS[3]   the thread's queue (list of waiting run ids)
KEYS[4]   queued-threads index (zset: thread -> ms when a run was queued)
KEYS[5]   hash of the queue's head (ARGV[2])
KEYS[6]   the head's event stream
KEYS[7]   ready index (zset: ref -> ms when READY)
KEYS[8..] node hashes of the head, in the order of ARGV[7..]

ARGV[1]   the thread's active run as the caller read it ("" if none)
ARGV[2]   the queue's head as the caller read it
ARGV[3]   thread id
ARGV[4]   ref prefix of the head "thread:run:" (a node's ref is prefix .. node id)
ARGV[5]   event stream MAXLEN (approximate)
ARGV[6]   who promotes (recorded as the event's worker)
ARGV[7..] the head's node ids

Returns
  {1, ready_id, ready_queue, ...}
                    the head is now the active run; enqueue its READY
                    nodes (pairs of id and queue)
  {2}               the head had ended while queued (cancelled): dropped
  {3}               the queue is empty: nothing to do
  {-21, active_run_id}  the active run has not ended
  -23               the active run or the head changed: read again
]]
local rcall = redis.call
local activeKey, activeRunKey, queueKey, queuedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local headKey, evKey, readyKey = KEYS[5], KEYS[6], KEYS[7]
local active, head, thread, refPrefix, maxlen, who = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

if (rcall('GET', activeKey) or '') ~= active then return -23 end
local first = rcall('LINDEX', queueKey, 0)
if not first then
  rcall('ZREM', queuedKey, thread)
  return {3}
end
if first ~= head then return -23 end
if active ~= '' then
  local st = rcall('HGET', activeRunKey, 'status')
  if st == 'RUNNING' or st == 'QUEUED' then return {-21, active} end
end

rcall('LPOP', queueKey)
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if rcall('LLEN', queueKey) == 0 then
  rcall('ZREM', queuedKey, thread)
else
  rcall('ZADD', queuedKey, now, thread)
end
local h = rcall('HMGET', headKey, 'status', 'multitask', 'start_at')
if h[1] ~= 'QUEUED' then return {2} end

rcall('SET', activeKey, head)
rcall('HSET', headKey, 'status', 'RUNNING', 'started_at', now)
-- A run given a start (submit.lua) keeps it when it waited in the queue;
-- one without had its submit's time, long past.
local due = math.max(now, tonumber(h[3]) or 0)
local out = {1}
for i = 8, #KEYS do
  local n = rcall('HMGET', KEYS[i], 'state', 'remaining', 'queue')
  if n[1] == 'BLOCKED' and (tonumber(n[2]) or 0) == 0 then -- 0 is not stored
    local id = ARGV[i - 1]
    rcall('HSET', KEYS[i], 'state', 'READY', 'ready_at', due)
    rcall('ZADD', readyKey, due, refPrefix .. id)
    out[#out + 1] = id
    out[#out + 1] = n[3]
  end
end
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'started',
  'node', '', 'epoch', 0, 'worker', who, 'at', now, 'after', active, 'multitask', h[2] or '')
return out
