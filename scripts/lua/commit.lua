--[[ commit: record the caller's result and move the node to SUCCEEDED.

Accepted only while the node is RUNNING under the caller's epoch and claim
id, compared in this script; a mismatch is recorded as stale_rejected and the
stored state is untouched. Dependents whose last dependency this was become
READY and are returned for enqueueing (unless the run was cancelled).

Continuation: when ARGV[8] is set, the first such dependent whose queue and
kind the caller serves is claimed for the caller in this same step (epoch+1,
lease, claimed event) instead of being enqueued, so a chain of nodes runs
without a queue round trip per step. The lease index covers it as any claim.

A one-node run that SUCCEEDED is retained by the commit that ends it
(lib/retain_run.lua, as retain.lua would: given ARGV[12] as its time to
live, its stream stored at its size) when ARGV[12] is above 0: it costs
no node-list read and no retain.lua call of its own. Its run hash, which
holds nothing to drop, is left as it is; its node loses its lease and
keeps state, epoch and claim, so a replay is still recognised. A run
without a thread never enters the finished index; it has no locator,
unless stored before runs without a thread stopped having one (its run
hash then holds its id): that locator, in this slot, gets its time to
live here. A run of a thread has its locator in another slot: the bare
run id goes to the finished index, as retain.lua leaves it, for the
sweep to give the locator its time to live. Runs of
several nodes, or ended another way, go through the finished index.

Taking the queue's next node: when ARGV[14] names an Asynq queue and no
dependent was continued, the commit claims for the caller, in this same
step, the first due READY node of this shard (the ready index) whose
queue is that one, whose kind the caller runs, and which names no limits
and carries no resumed wait, provided its delivery still waits in the
queue within the last 64 pending tasks (the next to be dequeued): that
task is removed and counted as processed, as Asynq's own done would, and
the node is claimed as claim.lua would (epoch+1, attempt+1, lease,
claimed event; prev_owner and end_op of an earlier attempt dropped). So a
drain of one-node runs goes, like a chain, one script call per node
instead of Asynq's dequeue and done plus a claim and a commit. Its keys
are not passed: they are in this slot, named from the ready index's ref;
the queue's keys are in another slot, so the caller asks for this only on
a single server. A node whose delivery is not found (dequeued already, or
not yet due) is left to its delivery. The committed node's field next
names the taken node (ref), for a replay; packing keeps it, for a replay
that finds the run packed (fence's commit claims it again then, with the
continuation claim id, as a retried claim).

A retry of an accepted commit (its reply was lost) changes nothing and
answers as the first time, with code 2: the continuation (or the taken
node) still RUNNING under the continuation claim id, its lease renewed from
now (as claim.lua renews a replayed claim), the dependents still READY, and
the waiters the commit handed a slot to that have not claimed it yet
(lib/woke.lua).

When the node has limits, the holders hash and waiters zset of each
follow the other keys (lib/limits.lua): the claim's slots are freed and
handed to the first waiters, whom a trailing {woken...} ("ref|queue")
appended to the reply lists for the caller to enqueue.

Spend: when ARGV[13] reports the cost the attempt learned (Task.Spend,
"::spend N"), the limit definitions hash and each limit's rate state
follow the pairs, and the difference between it and the cost the claim
took is charged to (or refunded from) every limit the node named with a
cost, on Redis's clock (lib/limits.lua chargeSpend); the committed event
says so (fields spent, charged). Only the first, accepted commit of the
claim charges: a stale one is fenced first, a replay answers before.

KEYS[1]   node hash
KEYS[2]   run hash
KEYS[3]   run event stream
KEYS[4]   lease index (zset: ref -> lease_until ms)
KEYS[5]   ready index (zset: ref -> ms when READY)
KEYS[6]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[7..] node hashes of the direct dependents, in the order of ARGV[18..];
          then, for a run of a thread, the thread's queue (list of waiting
          run ids); for a run without a thread, the run id's locator when
          the time to live ARGV[12] is above 0 (its slot is then this one)

ARGV[1]   node id
ARGV[2]   worker id
ARGV[3]   epoch the caller claimed under
ARGV[4]   claim id the caller claimed under
ARGV[5]   result (JSON text, stored verbatim; a SUCCEEDED node reads as
          progress 100, none stored)
ARGV[6]   ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[7]   event stream MAXLEN (approximate)
ARGV[8]   claim id for a continuation, or "" for none
ARGV[9]   lease ttl of a continuation, ms
ARGV[10]  queues the caller serves, ",q1,q2,"
ARGV[11]  kinds the caller runs, ",k1,k2,"
ARGV[12]  time to live, ms, of the run's keys should this commit end a
          one-node run; 0: leave the run to the retention sweep
ARGV[13]  the cost the attempt reported, a whole number from 0 to 2^40,
          or "" for none (the claim's cost stands)
ARGV[14]  key prefix of the Asynq queue to take the next node from
          ("asynq:{QUEUE}:"), or "" to take none
ARGV[15]  key prefix of this shard's thread keys ("PREFIX:{TAG}:")
ARGV[16]  the processed count's day, as Asynq names it (UTC "2006-01-02")
ARGV[17]  when that day's count expires, Unix seconds (Asynq's stats TTL)
ARGV[18..] ids of the direct dependents

Returns
  queued is 1 when the run has ended and a run waits in its thread's
  queue, for the caller to start (Promote); else 0.
  {1, run_status, queued, 0, ready_id, ready_queue, ...}
        committed; pairs of dependents now READY and their queues
  {1, run_status, queued, 1, id, epoch, attempt, lease_until_ms, kind, queue,
   input, timeout_ms, max_attempts, dependents_json, descendants_json,
   incarnation, deps_json, ready_id, ready_queue, ...}
        committed, and dependent id is now RUNNING under the caller's
        continuation claim; deps_json lists its direct dependencies (as
        claim.lua's reply)
  {2, run_status, queued, ...}  this claim had already committed (a replay); the
        rest as for code 1
  Where the continuation goes, a taken node may instead:
  {..., 3, id, epoch, attempt, lease_until_ms, kind, queue, input,
   timeout_ms, max_attempts, dependents_json, descendants_json, incarnation,
   deps_json, thread, run, ready_id, ready_queue, ...}
        the node id of run thread/run is RUNNING under the caller's
        continuation claim (taken from the queue ARGV[14])
  -1   node missing
  -10  stale epoch: the node was claimed again since
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING (released or failed)
]]
local rcall = redis.call
local nodeKey, runKey, evKey, leaseKey, readyKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local nodeID, worker, epoch, claimID = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local result, refPrefix, maxlen = ARGV[5], ARGV[6], ARGV[7]
local contClaim, contTTL, queues, kinds = ARGV[8], tonumber(ARGV[9]), ARGV[10], ARGV[11]
local retainTTL = tonumber(ARGV[12])
local spendRaw = ARGV[13]
local takeFrom, shardPrefix = ARGV[14], ARGV[15]
local lastDep = 6 + #ARGV - 17 -- KEYS[7..lastDep] are the dependents
--@include ref
local threadless = threadID == runID
-- queued says, once the run has ended, whether a run of its thread waits
-- in the thread's queue: only then has the caller a run to start (Promote).
local function queued(status)
  if threadless or status == 'RUNNING' or not KEYS[lastDep + 1] then return 0 end
  if rcall('LLEN', KEYS[lastDep + 1]) > 0 then return 1 end
  return 0
end

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim')
if not f[1] then return -1 end
--@include clock
--@include fence_check
local stale = staleCode(f[2], f[3], 'commit')
if stale then return stale end

-- What a dependent's hash is read for, only by a commit that has
-- dependents (a one-node run's has none: no table is built).
local contFields
if lastDep >= 7 then
  contFields = {'state', 'queue', 'kind', 'epoch', 'attempt', 'input', 'timeout_ms',
    'max_attempts', 'dependents', 'descendants', 'inc', 'deps', 'claim', 'lease_until'}
end
local function contReply(id, d, epoch, attempt, leaseUntil)
  return {1, id, epoch, attempt, leaseUntil, d[3], d[2], d[6], tonumber(d[7]) or 0, tonumber(d[8]),
    d[9] or '[]', d[10] or '[]', d[11] or '', d[12] or '[]'} -- defaults are not stored (submit.lua)
end

-- Taking the queue's next node (the header). A taken node is named by its
-- ref in the ready index; its keys share this shard's tag.
local takeFields = {'state', 'queue', 'kind', 'epoch', 'attempt', 'input', 'timeout_ms',
  'max_attempts', 'dependents', 'descendants', 'inc', 'deps', 'claim',
  'ready_at', 'limits', 'resume', 'prev_owner', 'end_op'}
local function takenReply(th, rn, nd, d, e, a, lu)
  local out = contReply(nd, d, e, a, lu)
  out[1] = 3
  out[#out + 1] = th
  out[#out + 1] = rn
  return out
end
-- takenAgain answers a replay with the node its first try took, while the
-- caller's claim still holds it: the lease renewed from now.
local function takenAgain()
  local ref = rcall('HGET', nodeKey, 'next')
  if not ref then return nil end
  local th, rn, nd = string.match(ref, '^([^:]+):([^:]+):([^:]+)$')
  if not th then return nil end
  local nk = shardPrefix .. th .. ':node:' .. rn .. ':' .. nd
  local d = rcall('HMGET', nk, unpack(takeFields, 1, 13))
  if d[1] ~= 'RUNNING' or d[13] ~= contClaim then return nil end
  local renewed = now + contTTL
  local renewedS = int(renewed)
  rcall('HSET', nk, 'lease_until', renewedS, 'heartbeat_at', nowS)
  rcall('ZADD', leaseKey, renewedS, ref)
  return takenReply(th, rn, nd, d, tonumber(d[4]), tonumber(d[5]), renewed)
end
local function takeNext()
  if rcall('EXISTS', takeFrom .. 'paused') == 1 then return nil end
  local queue = string.match(takeFrom, '^asynq:{(.*)}:$')
  local pending = takeFrom .. 'pending'
  for _, ref in ipairs(rcall('ZRANGEBYSCORE', readyKey, '-inf', nowS, 'LIMIT', 0, 4)) do
    local th, rn, nd = string.match(ref, '^([^:]+):([^:]+):([^:]+)$')
    local nk = th and (shardPrefix .. th .. ':node:' .. rn .. ':' .. nd)
    local d = nk and rcall('HMGET', nk, unpack(takeFields))
    if d and d[1] == 'READY' and d[2] == queue and (tonumber(d[14]) or 0) <= now
        and (d[15] or '') == '' and (d[16] or '') == ''
        and string.find(kinds, ',' .. d[3] .. ',', 1, true) then
      -- Its delivery is the attempt's task (internal/delivery.TaskID).
      local task = rn .. ':' .. nd .. ':' .. int(tonumber(d[5]) + 1)
      if rcall('LPOS', pending, task, 'RANK', -1, 'MAXLEN', 64) then
        rcall('LREM', pending, -1, task)
        rcall('DEL', takeFrom .. 't:' .. task)
        local day = takeFrom .. 'processed:' .. ARGV[16]
        if rcall('INCR', day) == 1 then rcall('EXPIREAT', day, ARGV[17]) end
        rcall('INCR', takeFrom .. 'processed')
        local e, a, lu = tonumber(d[4]) + 1, tonumber(d[5]) + 1, now + contTTL
        local eS, aS, luS = int(e), int(a), int(lu)
        rcall('HSET', nk, 'state', 'RUNNING', 'epoch', eS, 'attempt', aS, 'owner', worker,
          'claim', contClaim, 'lease_until', luS, 'started_at', nowS)
        if (d[17] or '') ~= '' or (d[18] or '') ~= '' then rcall('HDEL', nk, 'prev_owner', 'end_op') end
        rcall('ZADD', leaseKey, luS, ref)
        rcall('ZREM', readyKey, ref)
        rcall('XADD', shardPrefix .. th .. ':events:' .. rn, 'MAXLEN', '~', maxlen, '*', 'type', 'claimed',
          'node', nd, 'epoch', eS, 'worker', worker, 'at', nowS, 'attempt', aS)
        rcall('HSET', nodeKey, 'next', ref)
        return takenReply(th, rn, nd, d, e, a, lu)
      end
    end
  end
  return nil
end

if f[1] == 'SUCCEEDED' then
  local st = rcall('HGET', runKey, 'status')
  local out = {2, st, queued(st)}
  local cont, ready = {0}, {}
  for i = 7, lastDep do
    local d = rcall('HMGET', KEYS[i], unpack(contFields))
    if cont[1] == 0 and contClaim ~= '' and d[1] == 'RUNNING' and d[13] == contClaim then
      local renewed = now + contTTL
      local renewedS = int(renewed)
      rcall('HSET', KEYS[i], 'lease_until', renewedS, 'heartbeat_at', nowS)
      rcall('ZADD', leaseKey, renewedS, refPrefix .. ARGV[i + 11])
      cont = contReply(ARGV[i + 11], d, tonumber(d[4]), tonumber(d[5]), renewed)
    elseif d[1] == 'READY' then
      ready[#ready + 1] = ARGV[i + 11]
      ready[#ready + 1] = d[2]
    end
  end
  if cont[1] == 0 and contClaim ~= '' then cont = takenAgain() or cont end
  for _, v in ipairs(cont) do out[#out + 1] = v end
  for _, v in ipairs(ready) do out[#out + 1] = v end
--@include woke
  local again = wokeAgain(nodeKey, claimID)
  if again then out[#out + 1] = again end
  return out
end
if f[1] ~= 'RUNNING' then return -12 end

rcall('HSET', nodeKey, 'state', 'SUCCEEDED', 'result', result, 'finished_at', nowS)
rcall('ZREM', leaseKey, refPrefix .. nodeID)
--@include limits
local spend = spendArg(spendRaw)
local wakes, limList, limFirst = freeLimits(nodeKey, refPrefix .. nodeID, claimID, now, spend)
if spend and limList then
  local charged = chargeSpend(limList, limFirst, spend, now)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'committed',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', nowS, 'spent', spendRaw, 'charged', charged)
else
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'committed',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', nowS)
end

local r = rcall('HMGET', runKey, 'cancel', 'total', 'failed', 'terminal', 'id')
local cont = {0}
local ready = {}
if r[1] ~= '1' then
  for i = 7, lastDep do
    local depID = ARGV[i + 11]
    local remaining = rcall('HINCRBY', KEYS[i], 'remaining', -1)
    if remaining == 0 then
      local d = rcall('HMGET', KEYS[i], unpack(contFields, 1, 12))
      if d[1] == 'BLOCKED' then
        if cont[1] == 0 and contClaim ~= '' and string.find(queues, ',' .. d[2] .. ',', 1, true)
            and string.find(kinds, ',' .. d[3] .. ',', 1, true)
            and rcall('HEXISTS', KEYS[i], 'limits') == 0 then -- a node with limits is claimed through claim.lua
          local e, a, lu = tonumber(d[4]) + 1, tonumber(d[5]) + 1, now + contTTL
          local eS, aS, luS = int(e), int(a), int(lu)
          rcall('HSET', KEYS[i], 'state', 'RUNNING', 'epoch', eS, 'attempt', aS, 'owner', worker,
            'claim', contClaim, 'lease_until', luS, 'ready_at', nowS, 'started_at', nowS,
            'end_op', '') -- no prev_owner: a BLOCKED node has none (retry.lua drops it)
          rcall('ZADD', leaseKey, luS, refPrefix .. depID)
          rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'claimed',
            'node', depID, 'epoch', eS, 'worker', worker, 'at', nowS, 'attempt', aS)
          cont = contReply(depID, d, e, a, lu)
        else
          rcall('HSET', KEYS[i], 'state', 'READY', 'ready_at', nowS)
          rcall('ZADD', readyKey, nowS, refPrefix .. depID)
          ready[#ready + 1] = depID
          ready[#ready + 1] = d[2]
        end
      end
    end
  end
end

local terminal = tonumber(r[4]) + 1
local status = 'RUNNING'
if terminal >= tonumber(r[2]) then
  status = 'SUCCEEDED'
  if r[1] == '1' then status = 'CANCELLED' elseif (tonumber(r[3]) or 0) > 0 then status = 'FAILED' end
  rcall('HSET', runKey, 'terminal', int(terminal), 'status', status, 'finished_at', nowS)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'run_finished',
    'node', '', 'epoch', '0', 'worker', worker, 'at', nowS, 'status', status)
  if retainTTL > 0 and status == 'SUCCEEDED' and r[2] == '1' then
    -- Included here, not at the top: only this branch makes their functions.
--@include stream
--@include retain_run
    local locator = {}
    if threadless and r[5] and KEYS[lastDep + 1] then locator[1] = KEYS[lastDep + 1] end -- a run stored with its id has a locator
    retainRun(runKey, evKey, {nodeKey}, locator, retainTTL, status, true)
    if not threadless then
      rcall('ZADD', finKey, nowS, runID)
    end
  else
    rcall('ZADD', finKey, nowS, refPrefix)
  end
else
  rcall('HSET', runKey, 'terminal', int(terminal))
end
if cont[1] == 0 and contClaim ~= '' and takeFrom ~= '' then cont = takeNext() or cont end
local out = {1, status, queued(status)}
for _, v in ipairs(cont) do out[#out + 1] = v end
for _, v in ipairs(ready) do out[#out + 1] = v end
if wakes and #wakes > 0 then out[#out + 1] = wakes end
return out
