--[[ park: end an attempt by parking its node until someone resumes it.

A node waiting for a person or an outside event (an approval, LangGraph's
interrupt()) holds no lease and no worker: its owner parks it. Fenced as
commit.lua: only the current claim of a RUNNING node. The node becomes
WAITING with the request stored (field wait) under a new wait id; its
lease is released and the attempt is not counted (releases + 1, as
release.lua); the run stays RUNNING, so its thread stays busy and the
multitask strategies apply. resume.lua answers the wait. In a cancelled
run the node is CANCELLED instead. A retry of an accepted park (its reply
was lost) finds end_claim and answers as the first time, before the
fence.

When the node has limits, the holders hash and waiters zset of each
follow the other keys (lib/limits.lua): the claim's slots are freed and
handed to the first waiters, whom a trailing {woken...} ("ref|queue")
appended to the reply lists for the caller to enqueue. A replay appends
those of them that have not claimed their slot yet (lib/woke.lua): the
lost reply's list never reached the caller.

KEYS[1] node hash
KEYS[2] run hash
KEYS[3] run event stream
KEYS[4] lease index (zset: ref -> lease_until ms)
KEYS[5] finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[6] waits index (zset: ref -> ms when the sweeper next looks at the
        wait: its timeout, or its thread state's keep-alive, wait_keep.lua)

ARGV[1]  node id
ARGV[2]  worker id
ARGV[3]  epoch the caller claimed under
ARGV[4]  claim id the caller claimed under
ARGV[5]  request: JSON text, stored verbatim
ARGV[6]  wait id (made by the caller; the same on a retry)
ARGV[7]  timeout, ms ("0": none)
ARGV[8]  on timeout: "fail" or "resume"
ARGV[9]  on timeout "resume": the value, JSON text
ARGV[10] ref of the node in the indexes
ARGV[11] event stream MAXLEN (approximate)

Returns
  {1, wait_id}       parked: WAITING
  {3, run_status}    CANCELLED (its run was cancelled)
  -1   node missing
  -10  stale epoch: the node was claimed again since
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING
]]
local rcall = redis.call
local nodeKey, runKey, evKey, leaseKey, finKey, waitsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local nodeID, worker, epoch, claimID = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local request, waitID, timeout, onTimeout, default = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8], ARGV[9]
local ref, maxlen = ARGV[10], ARGV[11]

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim', 'end_claim', 'wait_id')
if not f[1] then return -1 end
--@include clock
--@include fence_check
--@include end_claim
-- A retry of this claim's accepted park answers as the first time.
local code = endedAs(f[4], 'park', claimID)
if code then
--@include woke
  local r = {1, f[5] or waitID}
  if code ~= '4' then r = {3, rcall('HGET', runKey, 'status')} end
  r[3] = wokeAgain(nodeKey, claimID)
  return r
end
local stale = staleCode(f[2], f[3], 'park')
if stale then return stale end
if f[1] ~= 'RUNNING' then return -12 end
rcall('ZREM', leaseKey, ref)
--@include limits
local wakes = freeLimits(nodeKey, ref, claimID, now)
local function out(r)
  if wakes and #wakes > 0 then r[#r + 1] = wakes end
  return r
end

if rcall('HGET', runKey, 'cancel') == '1' then
  rcall('HSET', nodeKey, 'state', 'CANCELLED', 'error', 'run cancelled', 'finished_at', nowS,
    'end_op', 'park', 'end_claim', endedWith(f[4], 'park', claimID, 3))
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'cancelled',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', nowS, 'reason', 'run cancelled while parking')
  local r = rcall('HMGET', runKey, 'total')
  local terminal = rcall('HINCRBY', runKey, 'terminal', 1)
  local status = 'RUNNING'
  if terminal >= tonumber(r[1]) then
    status = 'CANCELLED'
    rcall('HSET', runKey, 'status', status, 'finished_at', nowS)
    rcall('ZADD', finKey, nowS, string.sub(ref, 1, #ref - #nodeID))
    rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'run_finished',
      'node', '', 'epoch', 0, 'worker', worker, 'at', nowS, 'status', status)
  end
  return out({3, status})
end

rcall('HINCRBY', nodeKey, 'releases', 1)
rcall('HINCRBY', runKey, 'waiting', 1) -- for listings (enqueue list)
rcall('HSET', nodeKey, 'state', 'WAITING', 'wait', request, 'wait_id', waitID, 'wait_at', nowS,
  'end_op', 'park', 'end_claim', endedWith(f[4], 'park', claimID, 4))
rcall('HDEL', nodeKey, 'resume', 'resumed_wait', 'wait_timeout_at', 'wait_on_timeout', 'wait_default', 'wait_keep_at')
if timeout > 0 then
  local due = int(now + timeout)
  rcall('HSET', nodeKey, 'wait_timeout_at', due, 'wait_on_timeout', onTimeout, 'wait_default', default)
end
-- Due at once: wait_keep.lua (called by the parker, else by the sweeper)
-- keeps the thread's state alive and scores the entry by the timeout.
rcall('ZADD', waitsKey, nowS, ref)
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'parked',
  'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', nowS, 'wait_id', waitID, 'request', request)
return out({1, waitID})
