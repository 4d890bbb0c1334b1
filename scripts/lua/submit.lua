--[[ submit: create a run and all its nodes in one atomic step.

A run without a thread is a run of the thread of its own id, with strategy
"reject" (ARGV[8] ""). The thread's active run is the one its active-run
key names; while that key is absent, the run whose id is the thread, if
any. A thread is busy while its active run is RUNNING or runs wait in its
queue. An idle thread starts the run at once: it becomes the active run.
A busy thread refuses it under "reject" (and without a thread); the other
strategies store it QUEUED, its nodes BLOCKED: "enqueue" at the back of the
thread's queue, "interrupt" and "rollback" at the front, and these two
cancel the active run in this same step (lib/cancel_run.lua); "rollback"
also records that run as its target (field rollback_of), whose writes
promote.lua removes once it ended, before the next run starts.
promote.lua starts the queue's head once the active run has ended.
Concurrent submits to a thread are serialised by the active-run check
({-23, active}: read again).

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   the thread's active-run key
KEYS[5]   hash of the active run ARGV[7] names; when ARGV[7] is "", the
          hash of the run whose id is the thread
KEYS[6]   the thread's queue (list of waiting run ids)
KEYS[7]   queued-threads index (zset: thread -> ms when a run was queued)
KEYS[8]   run listing index (zset: run id -> ms when created)
KEYS[9]   the run id's locator (string: run id -> thread) when ARGV[12] is
          "1"; else any key of the thread (the caller claimed the run id,
          locator.lua)
KEYS[10]  event stream of the active run of KEYS[5] (any key of the
          thread when none)
KEYS[11]  finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[12]  the run's packed key (Keys.Packed): a finished run packed into
          one string (lib/pack.lua) still holds its id
KEYS[13]  deadlines index (zset: "thread:run:" -> deadline ms; timeout.lua)
KEYS[14..] node hashes, one per node, in the order of ARGV[5]'s array;
          then, for "interrupt" and "rollback", the node hashes of the
          active run of KEYS[5], in the order of ARGV[18..]; then the
          holders hash and waiters zset of each limit key its nodes name
          (lib/limits.lua): a slot handed to one of its READY nodes goes
          to the next waiter (a key not passed: its hold runs out)

ARGV[1] run id
ARGV[2] thread id
ARGV[3] spec digest (idempotency: same id + same digest = same run)
ARGV[4] ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[5] nodes, JSON array of {id, kind, queue, input, deps, dependents,
        descendants, max_attempts, timeout_ms, retry, limits}; input is a JSON text
        kept verbatim as a string; retry the node's retry policy as JSON
        text ("" or absent: the worker's default), stored as the field
        retry for the worker to read when an attempt fails
ARGV[6] event stream MAXLEN (approximate)
ARGV[7] the thread's active-run key as the caller read it ("" if absent)
ARGV[8] multitask strategy: "" (no thread: the run's own), "reject",
        "enqueue", "interrupt" or "rollback"
ARGV[9] incarnation: a new id for this submission, made by the caller, so
        that a run id reused after retention never continues the epochs
        (and fencing tokens) of the run that held it before
ARGV[10] start_at: ms since the epoch before which no root node is due;
        "0": none (spec start_at)
ARGV[11] start_in: ms after now, Redis's TIME, before which no root node
        is due; "0": none (spec start_in). The later of the two wins.
ARGV[12] "1": the run is its own thread: it has no locator, and the id is
        refused when a locator (KEYS[9], in this slot) names it for a
        thread; the run hash, found by id, says the id is taken
ARGV[13] Pub/Sub channel of the cancel push ("" for none; cancel.lua)
ARGV[14] "interrupt" and "rollback": the active run's field "nodes" as the
        caller read it ("" when none), to check that ARGV[15..] are its
        nodes
ARGV[15] the run's trace context (tracing.Carrier: a W3C traceparent,
        then a newline and the tracestate), stored as the run's field trace
        for every attempt of its nodes to join; "" for none
ARGV[16] the run's timeout, ms: what is left of the run is cancelled
        (timeout.lua) once it has passed since the run's start; "0": none
ARGV[17] the timeout as the spec wrote it ("10m"), for the cancel's reason
ARGV[18..] "interrupt" and "rollback": the active run's node ids

Returns
  {1, status, incarnation, behind, start_ms, ready_id...}
                            created, RUNNING or QUEUED behind the thread's
                            active run; ready_id are the nodes with no deps,
                            now READY (none when QUEUED), due at start_ms
                            (Redis time; now without a start); a
                            trailing {woken...} ("ref|queue") lists the
                            waiters handed the slots of the cancelled
                            active run's nodes, for the caller to enqueue
  {2, status, incarnation, behind, start_ms, ready_id...}
                            the run already exists with the same digest (a
                            retry): no change; incarnation is the stored one,
                            ready_id the nodes still READY, to enqueue again;
                            start_ms the stored start (0: a run stored
                            before starts existed)
  -20                       the run exists with a different digest
  {-20, thread}             the run id is taken by a run of another thread
  {-21, active_run_id}      reject (or no thread): the thread is busy
  {-23, active}             the thread's active-run key is not what the
                            caller read (active: what it is, "" if
                            absent), or the active run's nodes are not:
                            read again and retry
]]
local rcall = redis.call
--@include stream
local runKey, evKey, readyKey = KEYS[1], KEYS[2], KEYS[3]
local runID, thread, digest, refPrefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local nodes = cjson.decode(ARGV[5])
local maxlen = ARGV[6]
local activeKey, activeRunKey, expectedActive, multitask = KEYS[4], KEYS[5], ARGV[7], ARGV[8]
local queueKey, queuedKey = KEYS[6], KEYS[7]
local inc = ARGV[9]
local startAt, startIn = tonumber(ARGV[10]) or 0, tonumber(ARGV[11]) or 0
local runsKey, locKey, ownLocator = KEYS[8], KEYS[9], ARGV[12] == '1'
local activeEvKey, finKey, channel = KEYS[10], KEYS[11], ARGV[13]
local packedKey, deadlinesKey = KEYS[12], KEYS[13]
local timeoutMS, timeoutLabel = tonumber(ARGV[16]) or 0, ARGV[17]
local firstNode = 13 -- KEYS[firstNode + i] is node i's hash
--@include limits
--@include cancel_run

-- Redis's cjson encodes an empty table as {} (an object) and decodes null as
-- a userdata; lists are stored as JSON arrays whatever the input.
local function list(v)
  if type(v) ~= 'table' or #v == 0 then return '[]' end
  return cjson.encode(v)
end

-- Fields at their default are not written (readers take an absent field
-- as its default: a node has no owner, claim, lease or progress until a
-- claim or heartbeat writes them), but for the attempt and epoch the
-- scripts count up from; nor are the ids the key names carry. The
-- retention of a SUCCEEDED run then has little or nothing to drop
-- (lib/retain_run.lua).
-- A number is written as text, formatted once (lib/clock.lua).
local function optional(h, name, v, default)
  if v ~= default then
    if type(v) == 'number' then v = string.format('%d', v) end
    h[#h + 1] = name
    h[#h + 1] = v
  end
end

-- A run id names one run of one thread: a run of a thread has a locator
-- that says which; a run without one has none (locator.lua).
if ownLocator then
  local owner = rcall('GET', locKey)
  if owner and owner ~= thread then return {-20, owner} end
end

local existing = rcall('HGET', runKey, 'digest')
local packed -- the run hash of a finished run packed into one key
if not existing then
--@include pack
--@include unpack
  packed = unpackRunFields(rcall('GET', packedKey))
  if packed then existing = packed.digest or '' end
end
if existing then
  if existing == digest and packed then -- ended: no node is READY
    return {2, packed.status, packed.inc or '', packed.behind or '', tonumber(packed.start_at) or 0}
  end
  if existing == digest then
    local r = rcall('HMGET', runKey, 'status', 'inc', 'behind', 'start_at')
    local out = {2, r[1], r[2] or '', r[3] or '', tonumber(r[4]) or 0}
    for i, n in ipairs(nodes) do
      if rcall('HGET', KEYS[firstNode + i], 'state') == 'READY' then out[#out + 1] = n.id end
    end
    return out
  end
  return -20
end

--@include clock
-- The run's start, on Redis's clock: root nodes are READY from submit on,
-- but not due (claim.lua answers -4) before it.
local start = math.max(now, startAt, now + startIn)
local startS = int(start)

local status, behind = 'RUNNING', ''
local cur = rcall('GET', activeKey) or ''
if cur ~= expectedActive then return {-23, cur} end
-- The active run: the key's, else the run whose id is the thread (for a
-- run without a thread, this one: not stored yet, as read above).
local activeID, activeStatus = cur, false
if cur ~= '' or multitask ~= '' then activeStatus = rcall('HGET', activeRunKey, 'status') end
if cur == '' and activeStatus then activeID = thread end
local busy = activeStatus == 'RUNNING' or rcall('LLEN', queueKey) > 0
local cancels = busy and activeStatus == 'RUNNING' and (multitask == 'interrupt' or multitask == 'rollback')
if cancels and (rcall('HGET', activeRunKey, 'nodes') or '') ~= ARGV[14] then return {-23, cur} end
if busy then
  if multitask == '' or multitask == 'reject' then return {-21, activeID} end
  status, behind = 'QUEUED', activeID
  if multitask == 'enqueue' then
    rcall('RPUSH', queueKey, runID)
  else
    rcall('LPUSH', queueKey, runID)
  end
  rcall('ZADD', queuedKey, 'NX', nowS, thread)
elseif cur ~= '' or multitask ~= '' then
  -- A run without a thread is active while the key is absent: it writes
  -- the key only to take it from another run.
  rcall('SET', activeKey, runID)
end

-- interrupt and rollback cancel a RUNNING active run in this same step.
local rollbackOf = ''
local wakes -- waiters handed the slots of its cancelled nodes
if cancels then
  local nodeKeys, nodeIDs = {}, {}
  for i = 18, #ARGV do
    nodeIDs[#nodeIDs + 1] = ARGV[i]
    nodeKeys[#nodeKeys + 1] = KEYS[firstNode + #nodes + i - 17]
  end
  local verb = 'interrupted'
  if multitask == 'rollback' then
    verb, rollbackOf = 'rolled back', activeID
  end
  local _, _, _, w = cancelRun({run = activeRunKey, ev = activeEvKey, ready = readyKey, fin = finKey,
    prefix = thread .. ':' .. activeID .. ':', id = activeID, nodes = nodeKeys, ids = nodeIDs,
    reason = verb .. ' by run ' .. runID, who = runID, channel = channel, now = nowS,
    lim = limitKeysFrom(firstNode + #nodes + #ARGV - 16), limPartial = true})
  wakes = w
end

local ids = {}
local ready = {}
for i, n in ipairs(nodes) do
  ids[i] = n.id
  local deps = n.deps
  if type(deps) ~= 'table' then deps = {} end
  local state = 'BLOCKED'
  if #deps == 0 and status == 'RUNNING' then
    state = 'READY'
    ready[#ready + 1] = n.id
    rcall('ZADD', readyKey, startS, refPrefix .. n.id)
  end
  local h = {'state', state, 'kind', n.kind, 'queue', n.queue, 'input', n.input,
    'max_attempts', int(n.max_attempts), 'attempt', '0', 'epoch', '0', 'ready_at', startS, 'inc', inc}
  optional(h, 'remaining', #deps, 0)
  optional(h, 'deps', list(deps), '[]')
  optional(h, 'dependents', list(n.dependents), '[]')
  optional(h, 'descendants', list(n.descendants), '[]')
  optional(h, 'timeout_ms', tonumber(n.timeout_ms) or 0, 0)
  optional(h, 'retry', n.retry or '', '')
  optional(h, 'limits', n.limits or '', '')
  rcall('HSET', KEYS[firstNode + i], unpack(h))
end

local h = {'digest', digest, 'inc', inc, 'status', status, 'nodes', cjson.encode(ids), 'total', int(#nodes),
  'terminal', '0', 'created_at', nowS, 'start_at', startS}
optional(h, 'behind', behind, '')
optional(h, 'multitask', multitask, '')
optional(h, 'rollback_of', rollbackOf, '')
optional(h, 'trace', ARGV[15], '')
if timeoutMS > 0 then
  -- The run-level timeout, armed in this step: the deadline is the run's
  -- start plus the timeout, and the sweep's timeout.lua cancels what is
  -- left of the run once it has passed.
  local deadlineS = int(start + timeoutMS)
  optional(h, 'deadline_at', deadlineS, '')
  optional(h, 'timeout', timeoutLabel, '')
  rcall('ZADD', deadlinesKey, deadlineS, refPrefix)
end
rcall('HSET', runKey, unpack(h))
rcall('ZADD', runsKey, 'NX', nowS, runID)
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'submitted',
  'node', '', 'epoch', '0', 'worker', '', 'at', nowS, 'nodes', int(#nodes), 'ready_at', startS)

if status == 'QUEUED' then
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'queued',
    'node', '', 'epoch', '0', 'worker', '', 'at', nowS, 'behind', behind, 'multitask', multitask)
end
-- The stream's node was preallocated 4 KiB; the run may wait and run for
-- long, so the stream is stored at its size now (lib/stream.lua).
compactStream(evKey, 0)
local out = {1, status, inc, behind, start}
for _, id in ipairs(ready) do out[#out + 1] = id end
if wakes and #wakes > 0 then out[#out + 1] = wakes end
return out
