--[[ fail: record a failed attempt; retry later or end the node.

Modes:
  retry   the node goes back to READY at now + delay while attempts remain
          (attempt - releases < max_attempts), else it FAILS
  final   the node FAILS now (a permanent error)
  expire  the caller is not the owner: it ends a node whose owner's lease ran
          out (plus grace) when claim.lua said so (codes -6/-7); epoch and
          claim id are the expired owner's, read from that reply
In every mode a cancelled run turns the node CANCELLED instead. A node that
FAILS or is CANCELLED cancels its BLOCKED descendants, and the run's status
follows when every node is terminal.

A retry of an accepted call (its reply was lost) finds the node ended by the
same claim and mode (field end_op) and answers as the first time, changing
nothing; also once the node was claimed again (a retry READY, or a re-run
of the run): field end_claim remembers the claim's answer, and is read
before the fence.

When the node has limits, the holders hash and waiters zset of each
follow the other keys (lib/limits.lua): the claim's slots are freed and
handed to the first waiters, whom a trailing {woken...} ("ref|queue")
appended to the reply lists for the caller to enqueue. A replay appends
those of them that have not claimed their slot yet (lib/woke.lua): the
lost reply's list never reached the caller.

Spend: when ARGV[11] reports the cost the attempt learned (Task.Spend,
"::spend N"; modes retry and final), the limit definitions hash and each
limit's rate state follow the pairs, and the difference between it and
the cost the claim took is charged to (or refunded from) every limit the
node named with a cost, on Redis's clock (lib/limits.lua chargeSpend);
the failed event says so (fields spent, charged). Only the first,
accepted fail of the claim charges: a stale one is fenced first, a
replay answers before.

KEYS[1]   node hash
KEYS[2]   run hash
KEYS[3]   run event stream
KEYS[4]   lease index (zset: ref -> lease_until ms)
KEYS[5]   ready index (zset: ref -> ms when READY)
KEYS[6]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[7..] node hashes of all transitive dependents, in the order of ARGV[12..];
          then the limit keys (above)

ARGV[1]   node id
ARGV[2]   worker id
ARGV[3]   epoch the caller claimed under (mode expire: the expired owner's)
ARGV[4]   claim id likewise
ARGV[5]   error message
ARGV[6]   retry delay, ms
ARGV[7]   mode: retry | final | expire
ARGV[8]   grace after lease_until, ms (mode expire)
ARGV[9]   ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[10]  event stream MAXLEN (approximate)
ARGV[11]  the cost the attempt reported, a whole number from 0 to 2^40,
          or "" for none (the claim's cost stands); mode expire: ""
ARGV[12..] ids of all transitive dependents

Returns
  {1, ready_at_ms}   retry scheduled: READY again at ready_at
  {2, run_status}    the node FAILED
  {3, run_status}    the node was CANCELLED (its run was cancelled)
  -1   node missing
  -10  stale epoch: the node was claimed again since
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING
  -13  mode expire: the lease has not run out (plus grace)
]]
local rcall = redis.call
local nodeKey, runKey, evKey, leaseKey, readyKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local nodeID, worker, epoch, claimID, errMsg = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local delay, mode, grace = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local refPrefix, maxlen, spendRaw = ARGV[9], ARGV[10], ARGV[11]

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim', 'attempt', 'releases',
  'max_attempts', 'lease_until', 'owner', 'end_op', 'ready_at', 'end_claim')
if not f[1] then return -1 end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
--@include fence_check
--@include end_claim
if mode == 'expire' then
  -- The caller is not the owner: a mismatch means the owner renewed or
  -- the node moved on, not a stale write.
  if f[2] ~= epoch then return -10 end
  if f[3] ~= claimID then return -11 end
else
  -- A retry of this claim's accepted fail (its reply was lost) answers as
  -- the first time, before the fence: the node may have been claimed
  -- again since (lib/end_claim.lua).
  local code, readyAt = endedAs(f[11], 'fail', claimID)
  if code then
--@include woke
    local r = {tonumber(code), rcall('HGET', runKey, 'status')}
    if code == '1' then r[2] = tonumber(readyAt) end
    r[3] = wokeAgain(nodeKey, claimID)
    return r
  end
  local stale = staleCode(f[2], f[3], 'fail')
  if stale then return stale end
end
if f[1] ~= 'RUNNING' then
  local endOp = mode
  if endOp ~= 'expire' then endOp = 'fail' end
  if f[9] ~= endOp then return -12 end
  if f[1] == 'READY' then return {1, tonumber(f[10])} end
  local code = 2
  if f[1] == 'CANCELLED' then code = 3 end
  return {code, rcall('HGET', runKey, 'status')}
end
if mode == 'expire' then
  if tonumber(f[7]) + grace >= now then return -13 end
  errMsg = 'lease of ' .. f[8] .. ' expired at attempt ' .. f[4] .. ': ' .. errMsg
end
rcall('ZREM', leaseKey, refPrefix .. nodeID)
--@include limits
local spend
if mode ~= 'expire' then spend = spendArg(spendRaw) end
local wakes, limList, limFirst = freeLimits(nodeKey, refPrefix .. nodeID, claimID, now, spend)
-- spentFields are the failed event's fields saying what the spend charged.
local spentFields = {}
if spend and limList then spentFields = {'spent', spendRaw, 'charged', chargeSpend(limList, limFirst, spend, now)} end
local function out(r)
  if wakes and #wakes > 0 then r[#r + 1] = wakes end
  return r
end

local cancelled = rcall('HGET', runKey, 'cancel') == '1'
local attemptsLeft = tonumber(f[4]) - (tonumber(f[5]) or 0) < tonumber(f[6]) -- no releases: not stored
if not cancelled and mode == 'retry' and attemptsLeft then
  local readyAt = now + delay
  rcall('HSET', nodeKey, 'state', 'READY', 'ready_at', readyAt, 'error', errMsg,
    'end_op', 'fail', 'end_claim', endedWith(f[11], 'fail', claimID, 1, string.format('%d', readyAt)))
  rcall('ZADD', readyKey, readyAt, refPrefix .. nodeID)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'failed',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now,
    'attempt', f[4], 'error', errMsg, 'final', 0, unpack(spentFields))
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'retry_scheduled',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now, 'ready_at', readyAt)
  return out({1, readyAt})
end

local code, state, cause = 2, 'FAILED', 'dependency ' .. nodeID .. ' failed'
if cancelled then
  code, state, cause = 3, 'CANCELLED', 'run cancelled'
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'cancelled',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now, 'reason', errMsg, unpack(spentFields))
else
  rcall('HINCRBY', runKey, 'failed', 1)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'failed',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now,
    'attempt', f[4], 'error', errMsg, 'final', 1, unpack(spentFields))
end
local endOp = 'fail'
if mode == 'expire' then endOp = 'expire' end
rcall('HSET', nodeKey, 'state', state, 'error', errMsg, 'finished_at', now,
  'end_op', endOp)
if mode ~= 'expire' then rcall('HSET', nodeKey, 'end_claim', endedWith(f[11], 'fail', claimID, code)) end
local ended = 1
for i = 7, 6 + #ARGV - 11 do -- the dependents; limit keys may follow
  local s = rcall('HGET', KEYS[i], 'state')
  if s == 'BLOCKED' or s == 'READY' then
    local depID = ARGV[i + 5]
    rcall('HSET', KEYS[i], 'state', 'CANCELLED', 'error', cause, 'finished_at', now)
    rcall('ZREM', readyKey, refPrefix .. depID)
    rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'cancelled',
      'node', depID, 'epoch', 0, 'worker', worker, 'at', now, 'reason', cause)
    ended = ended + 1
  end
end

local r = rcall('HMGET', runKey, 'total', 'failed', 'cancel')
local terminal = rcall('HINCRBY', runKey, 'terminal', ended)
local status = 'RUNNING'
if terminal >= tonumber(r[1]) then
  status = 'SUCCEEDED'
  if r[3] == '1' then status = 'CANCELLED' elseif (tonumber(r[2]) or 0) > 0 then status = 'FAILED' end
  rcall('HSET', runKey, 'status', status, 'finished_at', now)
  rcall('ZADD', finKey, now, refPrefix)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'run_finished',
    'node', '', 'epoch', 0, 'worker', worker, 'at', now, 'status', status)
end
return out({code, status})
