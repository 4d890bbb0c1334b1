--[[ release: give a node back without counting a failed attempt.

Used on graceful shutdown: the node is READY at once so another worker
resumes it from its last checkpoint. In a cancelled run it is CANCELLED
instead. A retry of an accepted release (its reply was lost) finds the node
ended by the same claim (end_op = release) and answers as the first time;
also once the node was claimed again, by field end_claim, read before the
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
KEYS[5] ready index (zset: ref -> ms when READY)
KEYS[6] finished index (zset: "thread:run:" -> ms when the run ended)

ARGV[1] node id
ARGV[2] worker id
ARGV[3] epoch the caller claimed under
ARGV[4] claim id the caller claimed under
ARGV[5] reason
ARGV[6] ref of the node in the indexes
ARGV[7] event stream MAXLEN (approximate)

Returns
  {1, ""}            released: READY now
  {3, run_status}    CANCELLED (its run was cancelled)
  -1   node missing
  -10  stale epoch: the node was claimed again since
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING
]]
local rcall = redis.call
local nodeKey, runKey, evKey, leaseKey, readyKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local nodeID, worker, epoch, claimID = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local reason, ref, maxlen = ARGV[5], ARGV[6], ARGV[7]

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim', 'end_op', 'end_claim')
if not f[1] then return -1 end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
--@include fence_check
--@include end_claim
-- A retry of this claim's accepted release (its reply was lost) answers as
-- the first time, before the fence: the node may have been claimed again
-- since (lib/end_claim.lua).
local code = endedAs(f[5], 'release', claimID)
if code then
--@include woke
  local r = {1, ''}
  if code ~= '1' then r = {3, rcall('HGET', runKey, 'status')} end
  r[3] = wokeAgain(nodeKey, claimID)
  return r
end
local stale = staleCode(f[2], f[3], 'release')
if stale then return stale end
if f[1] ~= 'RUNNING' then
  if f[4] ~= 'release' then return -12 end
  if f[1] == 'READY' then return {1, ''} end
  return {3, rcall('HGET', runKey, 'status')}
end
rcall('ZREM', leaseKey, ref)
--@include limits
local wakes = freeLimits(nodeKey, ref, claimID, now)
local function out(r)
  if wakes and #wakes > 0 then r[#r + 1] = wakes end
  return r
end

if rcall('HGET', runKey, 'cancel') ~= '1' then
  rcall('HINCRBY', nodeKey, 'releases', 1)
  rcall('HSET', nodeKey, 'state', 'READY', 'ready_at', now, 'end_op', 'release', 'end_claim', endedWith(f[5], 'release', claimID, 1))
  rcall('ZADD', readyKey, now, ref)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'released',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now, 'reason', reason)
  return out({1, ''})
end

rcall('HSET', nodeKey, 'state', 'CANCELLED', 'error', 'run cancelled',
  'finished_at', now, 'end_op', 'release', 'end_claim', endedWith(f[5], 'release', claimID, 3))
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'cancelled',
  'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now, 'reason', reason)
local r = rcall('HMGET', runKey, 'total')
local terminal = rcall('HINCRBY', runKey, 'terminal', 1)
local status = 'RUNNING'
if terminal >= tonumber(r[1]) then
  status = 'CANCELLED'
  rcall('HSET', runKey, 'status', status, 'finished_at', now)
  rcall('ZADD', finKey, now, string.sub(ref, 1, #ref - #nodeID))
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'run_finished',
    'node', '', 'epoch', 0, 'worker', worker, 'at', now, 'status', status)
end
return out({3, status})
