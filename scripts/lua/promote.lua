--[[ promote: start the next queued run of a thread once its active run ended.

Called by whoever sees a thread's active run end (the worker whose write
ended it, the canceller, the submitter, the sweeper): any number of times,
by any number of callers, concurrently. It acts only when the active run,
the queue and the thread's checkpoint namespaces are still what the caller
read (else -23: read again) and the active run has ended. Then, in this
one step:
  1. a rollback: when a run still QUEUED names the ended active run as its
     rollback target (field rollback_of, set by submit.lua) and that run
     was not rolled back yet, everything it wrote to the thread's
     checkpoints is removed (lib/rollback.lua), once: the thread's state is
     what it was before that run, before any later run starts. A rollback
     run cancelled while queued removes nothing. The ended run's keys are
     written (field rolled_back_by, a rolled_back event) only while they
     exist: a run the retention packed into one key (lib/pack.lua), or
     whose keys expired, is read from its packed key, or taken as ended,
     and never written again; the rollback run then records it alone
     (field rolled_back, and the event on its stream). It always records
     it (field rolled_back: the target), so a second rollback of the
     same run finds it;
  2. the queue's head becomes the active run, RUNNING, and its nodes
     without dependencies READY. A head that was cancelled while queued is
     only taken off the queue (code 2): call again for the next.

KEYS[1]   the thread's active-run key
KEYS[2]   hash of the active run ARGV[1] names; when ARGV[1] is "", the
          hash of the run whose id is the thread (a run without a thread
          is active while the key is absent)
KEYS[3]   the thread's queue (list of waiting run ids)
KEYS[4]   queued-threads index (zset: thread -> ms when a run was queued)
KEYS[5]   ready index (zset: ref -> ms when READY)
KEYS[6]   the thread's checkpoint hash (ns -> last version assigned)
KEYS[7]   the head's event stream (the head is ARGV[8])
KEYS[8]   the active run's event stream (any key of the thread when none)
KEYS[9..] the hashes of the queued runs, in the order of ARGV[8..]; then
          their event streams, in the same order; then the active run's
          packed key (Keys.Packed); then per namespace of ARGV, four keys:
          versions zset, data hash, ids hash, pending writes hash; then the
          head's node hashes

ARGV[1]   the thread's active-run key as the caller read it ("" if absent)
ARGV[2]   thread id
ARGV[3]   ref prefix of the head "thread:run:" (a node's ref is prefix ..
          node id)
ARGV[4]   event stream MAXLEN (approximate)
ARGV[5]   who promotes (recorded as the event's worker)
ARGV[6]   Q, how many runs the queue holds as the caller read it
ARGV[7]   S, how many checkpoint namespaces the thread has as read
ARGV[8..] the queue's run ids, first first (Q of them); then the S
          namespaces; then the head's node ids

Returns
  {1, ready_id, ready_queue, ...}
                    the head is now the active run; enqueue its READY
                    nodes (pairs of id and queue)
  {2}               the head had ended while queued (cancelled): dropped
  {3}               the queue is empty: nothing to do
  {-21, active_run_id}  the active run has not ended
  -23               the active run, the queue or the namespaces changed:
                    read again
]]
local rcall = redis.call
local activeKey, activeRunKey, queueKey, queuedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local readyKey, cpKey, evKey, activeEvKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local active, thread, refPrefix, maxlen, who = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local nq, nns = tonumber(ARGV[6]), tonumber(ARGV[7])
-- KEYS[8 + i] is queued run i's hash, KEYS[8 + nq + i] its stream;
-- KEYS[firstNS + 4*(j-1) ..] namespace j's keys; KEYS[firstNode + i] the
-- head's node i, ARGV[firstNodeID + i] its id.
local packedKey = KEYS[9 + 2 * nq]
local firstNS = 10 + 2 * nq
local firstNode, firstNodeID = firstNS + 4 * nns - 1, 7 + nq + nns

if (rcall('GET', activeKey) or '') ~= active then return -23 end
local queue = rcall('LRANGE', queueKey, 0, -1)
if #queue == 0 then
  rcall('ZREM', queuedKey, thread)
  return {3}
end
if #queue ~= nq then return -23 end
for i = 1, nq do
  if queue[i] ~= ARGV[7 + i] then return -23 end
end
if rcall('HLEN', cpKey) ~= nns then return -23 end

local st = rcall('HMGET', activeRunKey, 'status', 'rolled_back_by')
local live = st[1] ~= false -- the active run's hash exists: its keys may be written
if not live then
--@include pack
--@include unpack
  local packed = unpackRunFields(rcall('GET', packedKey))
  if packed then st = {packed.status, packed.rolled_back_by} end
end
if st[1] == 'RUNNING' or st[1] == 'QUEUED' then
  if active == '' then return {-21, thread} end
  return {-21, active}
end
--@include clock
--@include rollback

-- 1. The rollback of the ended active run, once.
local activeID = active
if active == '' and st[1] then activeID = thread end
if activeID ~= '' and not st[2] then
  local target, done = nil, false
  for i = 1, nq do
    local q = rcall('HMGET', KEYS[8 + i], 'status', 'rollback_of', 'rolled_back')
    if q[3] == activeID then done = true end
    if not target and q[1] == 'QUEUED' and q[2] == activeID then target = i end
  end
  if target and not done then
    local removed = 0
    for j = 1, nns do
      local k = firstNS + 4 * (j - 1)
      removed = removed + rollbackNS({KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]}, activeID)
    end
    local by = queue[target]
    rcall('HSET', KEYS[8 + target], 'rolled_back', activeID)
    local ev = KEYS[8 + nq + target]
    if live then
      rcall('HSET', activeRunKey, 'rolled_back_by', by)
      ev = activeEvKey
    end
    rcall('XADD', ev, 'MAXLEN', '~', maxlen, '*', 'type', 'rolled_back',
      'node', '', 'epoch', '0', 'worker', who, 'at', nowS, 'by', by, 'of', activeID, 'checkpoints', int(removed))
  end
end

-- 2. The head.
local head = queue[1]
rcall('LPOP', queueKey)
if #queue == 1 then
  rcall('ZREM', queuedKey, thread)
else
  rcall('ZADD', queuedKey, nowS, thread)
end
local h = rcall('HMGET', KEYS[9], 'status', 'multitask', 'start_at')
if h[1] ~= 'QUEUED' then return {2} end

rcall('SET', activeKey, head)
rcall('HSET', KEYS[9], 'status', 'RUNNING', 'started_at', nowS)
-- A run given a start (submit.lua) keeps it when it waited in the queue;
-- one without had its submit's time, long past.
local due = int(math.max(now, tonumber(h[3]) or 0))
local out = {1}
for i = 1, #KEYS - firstNode do
  local key = KEYS[firstNode + i]
  local n = rcall('HMGET', key, 'state', 'remaining', 'queue')
  if n[1] == 'BLOCKED' and (tonumber(n[2]) or 0) == 0 then -- 0 is not stored
    local id = ARGV[firstNodeID + i]
    rcall('HSET', key, 'state', 'READY', 'ready_at', due)
    rcall('ZADD', readyKey, due, refPrefix .. id)
    out[#out + 1] = id
    out[#out + 1] = n[3]
  end
end
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'started',
  'node', '', 'epoch', '0', 'worker', who, 'at', nowS, 'after', activeID, 'multitask', h[2] or '')
return out
