--[[ retry: re-run a FAILED or CANCELLED run from its failed and cancelled nodes.

SUCCEEDED nodes keep their state and results. Every FAILED or CANCELLED
node goes back to READY (all its deps SUCCEEDED) or BLOCKED (remaining
recomputed: its deps that did not succeed, themselves re-run), as a claim
would fence it: its epoch grows by one and its claim id is cleared, so a
late write from any earlier attempt is refused (stale epoch) and recorded
as stale_rejected. Its wait and the answer its earlier attempt read are
cleared: a re-run node that parks asks again. Its attempts used start
again from zero: releases is set to attempt (claim.lua and fail.lua count
attempt - releases against max_attempts), so the node gets max_attempts again while attempt itself,
and the task ids made from it, keep growing. The run becomes RUNNING, its
counters (terminal: the SUCCEEDED nodes; failed; cancel flag and reason)
reset and its time to live (retention) removed.

A FAILED run the retention packed into one key (retain.lua) is written
back as its keys (lib/restore.lua) in the step that re-runs it,
and only then: a refused retry leaves it packed.

A run is retried only while it is still its thread's active run (a run
without a thread: while no run of the thread of its id took the key):
once the thread has moved on to another run, re-running this one would
run two of the thread's runs at once.

Idempotent: the same retry id again finds its own earlier retry (code 2),
however many retries under other ids came after it: every retry id is
kept, as field "retry:<id>" of the run hash, for the run's retention;
a run RUNNING already (retried under another id, or never finished) is
left alone (code 3), and refused (-24) while one of its nodes waits for a
resume.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   finished index (zset: "thread:run:" -> ms when the run ended;
          a bare "run" when its locator awaits its time to live)
KEYS[5]   the thread's active-run key
KEYS[6]   the run's packed key (lib/pack.lua)
KEYS[7..] every node hash of the run, in the order of ARGV[7..]

ARGV[1]   run id
ARGV[2]   retry id (made by the caller, the same on every retry of the
          request)
ARGV[3]   ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[4]   event stream MAXLEN (approximate)
ARGV[5]   "1" when the run belongs to a thread (check its active run)
ARGV[6]   who asked (recorded as the event's worker)
ARGV[7..] node ids

Returns
  {1, ready_id, ready_queue, ready_attempt, ...}
                    retried: the run is RUNNING; enqueue its READY nodes
                    (their next task is attempt + 1)
  {2, run_status, ready_id, ready_queue, ready_attempt, ...}
                    this retry id retried the run before (a lost reply):
                    nothing changed; the nodes still READY
  {3, run_status}   the run is RUNNING already: nothing changed
  -1                run missing
  {-24, run_status} nothing to retry: the run SUCCEEDED, or is QUEUED
  {-24, "RUNNING", node_id, wait_id}
                    the run is RUNNING and node_id waits on wait_id (a
                    wait still open): nothing changed
  {-14, active_run} the thread's active run is another run
]]
local rcall = redis.call
local runKey, evKey, readyKey, finKey, activeKey, packedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local runID, retryID, refPrefix, maxlen, threaded, who = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local firstNode = 6 -- KEYS[firstNode + i] is node i's hash, ARGV[6 + i] its id

--@include pack
--@include unpack
--@include restore

local r = rcall('HMGET', runKey, 'status', 'retry:' .. retryID)
local packed -- the packed run's string, when its keys are packed
if not r[1] then
  packed = rcall('GET', packedKey)
  local run = unpackRunFields(packed)
  if not run then return -1 end
  r = {run.status, run['retry:' .. retryID]}
end
local status = r[1]

-- readyNodes lists the READY nodes as {id, queue, attempt} triples.
local function readyNodes(out)
  for i = firstNode + 1, #KEYS do
    local n = rcall('HMGET', KEYS[i], 'state', 'queue', 'attempt')
    if n[1] == 'READY' then
      out[#out + 1] = ARGV[i]
      out[#out + 1] = n[2]
      out[#out + 1] = tonumber(n[3])
    end
  end
  return out
end

if retryID ~= '' and r[2] then return readyNodes({2, status}) end
if status == 'RUNNING' then
  -- A node still waits for a resume: refused, naming it (its answer,
  -- or a cancel, comes first).
  for i = firstNode + 1, #KEYS do
    local w = rcall('HMGET', KEYS[i], 'state', 'wait_id')
    if w[1] == 'WAITING' then return {-24, status, ARGV[i], w[2] or ''} end
  end
  return {3, status}
end
if status ~= 'FAILED' and status ~= 'CANCELLED' then return {-24, status} end
-- A run without a thread is active while the key is absent (submit.lua).
local active = rcall('GET', activeKey) or ''
if active ~= runID and (threaded == '1' or active ~= '') then return {-14, active} end

if packed then
  local nodeKeys = {}
  for i = firstNode + 1, #KEYS do nodeKeys[#nodeKeys + 1] = KEYS[i] end
  if not restoreRun(packed, runKey, nodeKeys, evKey) then return -1 end
  rcall('DEL', packedKey)
end

local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- First pass: which nodes keep their success.
local succeeded, nsucceeded = {}, 0
for i = firstNode + 1, #KEYS do
  if rcall('HGET', KEYS[i], 'state') == 'SUCCEEDED' then
    succeeded[ARGV[i]] = true
    nsucceeded = nsucceeded + 1
  end
end

local out, rerun = {1}, 0
for i = firstNode + 1, #KEYS do
  local key, id = KEYS[i], ARGV[i]
  local n = rcall('HMGET', key, 'state', 'deps', 'queue', 'attempt', 'epoch')
  if n[1] == 'FAILED' or n[1] == 'CANCELLED' then
    local remaining = 0
    for _, d in ipairs(cjson.decode(n[2] or '[]')) do
      if not succeeded[d] then remaining = remaining + 1 end
    end
    local state = 'BLOCKED'
    if remaining == 0 then state = 'READY' end
    local epoch = tonumber(n[5]) + 1
    rcall('HSET', key, 'state', state, 'remaining', remaining, 'epoch', epoch, 'claim', '', 'owner', '',
      'releases', n[4], 'error', '', 'progress', 0, 'lease_until', 0, 'ready_at', now,
      'end_op', 'retry')
    -- A re-run asks again: the answers its earlier attempts got (an
    -- approval, a timed-out wait's error) are not its to read. The
    -- record of each answer ("answer:<wait id>") stays for resume.lua's
    -- replay.
    rcall('HDEL', key, 'result', 'finished_at', 'prev_owner', 'resume', 'resumed_wait', 'wait', 'wait_id',
      'wait_at', 'wait_timeout_at', 'wait_on_timeout', 'wait_default')
    if state == 'READY' then
      rcall('ZADD', readyKey, now, refPrefix .. id)
      out[#out + 1] = id
      out[#out + 1] = n[3]
      out[#out + 1] = tonumber(n[4])
    end
    rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'retried',
      'node', id, 'epoch', epoch, 'worker', who, 'at', now, 'state', state, 'prev_state', n[1])
    rerun = rerun + 1
  end
  rcall('PERSIST', key)
end

rcall('HSET', runKey, 'status', 'RUNNING', 'terminal', nsucceeded, 'retry:' .. retryID, 1)
rcall('HINCRBY', runKey, 'retries', 1)
rcall('HDEL', runKey, 'finished_at', 'failed', 'cancel', 'cancel_reason') -- 0, 0, "": not stored
rcall('PERSIST', runKey)
rcall('PERSIST', evKey)
rcall('ZREM', finKey, refPrefix, runID) -- runID: a retained run's locator not yet expired
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'run_retried',
  'node', '', 'epoch', 0, 'worker', who, 'at', now, 'prev_status', status, 'nodes', rerun)
return out
