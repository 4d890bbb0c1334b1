--[[ claim: take ownership of a node for one attempt.

A claim succeeds on a READY node whose ready_at has passed, or on a RUNNING
node whose lease ran out more than the grace ago (a takeover). Either way the
epoch is incremented and the caller's claim id stored: every later
write must carry both. Time is Redis's TIME, never the caller's clock.

A retry with the same claim id (its first reply was lost) finds the node
RUNNING under that claim and answers as the first time, with the lease
renewed from now (only the claim's holder knows its id): the claim is not
made twice, no attempt is counted again, and the time the lost replies
took is not taken from the lease.

KEYS[1] node hash
KEYS[2] run hash
KEYS[3] run event stream
KEYS[4] lease index (zset: ref -> lease_until ms)
KEYS[5] ready index (zset: ref -> ms when READY)

ARGV[1] node id
ARGV[2] worker id (owner)
ARGV[3] claim id (unique per claim, made by the caller)
ARGV[4] lease ttl, ms
ARGV[5] grace after lease_until before a takeover, ms
ARGV[6] ref of the node in the indexes
ARGV[7] event stream MAXLEN (approximate)
ARGV[8] kinds the caller runs, ",k1,k2,"; "" claims any kind
ARGV[9] the node's limits the caller passes keys for ("k1=c1,k2=c2", as
        the node's field limits), "" for none
ARGV[10] "1" on a Redis Cluster: the limits live in other slots, where
        the caller takes them (limit_take.lua) between two calls of this
        script; "" or absent on a single server
ARGV[11] on a Redis Cluster, with ARGV[9] set: what the takes gave, ""
        all taken, "limit:KEY" no free slot under KEY, "rate:KEY:DELAY_MS"
        a rate spent for DELAY_MS more

When ARGV[9] is set, the keys of lib/limits.lua follow KEYS[5]: the
limit definitions hash, the index of limit keys seen, then per limit its
holders hash, waiters zset and rate state (3 keys). A node with limits is
claimed only with them (-31 says which); it takes a slot of each
concurrency limit and its cost from each rate, all or none.

On a Redis Cluster (ARGV[10]) no limit key is passed: the first call
answers -31 once the node is claimable but for its limits (after the
cancel, attempts and kind checks), naming its last claim id and queue
for the takes, also for a retried claim of this claim id (whose lease is
renewed only after its slots are); the second call passes ARGV[9] and
the takes' outcome (ARGV[11]) and claims, or records why the node waits.

Returns
  {1, epoch, attempt, lease_until_ms, kind, queue, input, timeout_ms,
   max_attempts, dependents_json, descendants_json, prev_owner, incarnation,
   deps_json, resume, limits}
         claimed (or this claim id's earlier claim, replayed, with the
         waiters the claim woke that still hold their slot); prev_owner is
         "" unless this was a takeover; incarnation names the run's
         submission (a reused run id gets a new one); deps_json lists the
         direct dependencies, whose results the caller reads next (they are
         SUCCEEDED, so their results never change again); resume is the
         answer to the wait the node was parked on (resume.lua), or "";
         limits is the node's field limits ("k1=c1,..."), whose slots
         the claim holds, "" for none.
  {-2, lease_until_ms}  busy: another owner's lease is live
  {-4, ready_at_ms}     READY but not due yet (retry backoff)
  {-6, epoch, claim_id, owner, descendants_json, limits}
         the expired owner used the last attempt: fail the node (fail.lua
         mode "expire") instead of claiming it; limits as the node's field
  {-7, epoch, claim_id, owner, descendants_json, limits}
         the expired owner's run was cancelled: end the node the same way
  {-8, kind, queue, ready_at_ms}
         the node's kind is not in ARGV[8]: nothing changed, no attempt
         counted; a worker that runs the kind must claim it
  -1  node missing
  -3  node terminal (SUCCEEDED, FAILED, CANCELLED)
  -5  node BLOCKED on dependencies
  -9  node WAITING: parked until resumed (park.lua, resume.lua)
  {-31, limits}  the node has limits: call again with their keys (ARGV[9])
  {-31, limits, last_claim, queue}  the same on a Redis Cluster
  {-3, limits}  on a Redis Cluster, a terminal node with limits: a slot
         handed to it as a woken waiter is the caller's to give back
  {-32, key, {woken...}}  no free slot under limit key: the node stays
         READY and waits first come first served (field waits), delivered
         again when a slot frees; woken lists "ref|queue" of waiters this
         call handed a slot to, for the caller to enqueue (a call again
         with the same claim id names again those still holding it)
  {-4, ready_at_ms, key}  a rate limit is spent until ready_at (field
         ready_at and waits say so); nothing taken
  A claim that woke waiters on its way appends {woken...} to its reply.
]]
local rcall = redis.call
local nodeKey, runKey, evKey, leaseKey, readyKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local nodeID, worker, claimID = ARGV[1], ARGV[2], ARGV[3]
local ttl, grace, ref, maxlen = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7]
local kinds = ARGV[8] or ''
local limitArg = ARGV[9] or ''
local cluster, taken = ARGV[10] == '1', ARGV[11] or ''

local f = rcall('HMGET', nodeKey, 'state', 'ready_at', 'lease_until', 'attempt',
  'releases', 'max_attempts', 'owner', 'epoch', 'claim', 'descendants',
  'kind', 'queue', 'input', 'timeout_ms', 'dependents', 'prev_owner', 'inc', 'deps', 'end_op', 'resume', 'limits', 'waits')
local state = f[1]
if not state then return -1 end
-- Fields at their default are not stored (submit.lua).
local releases, timeoutMS = tonumber(f[5]) or 0, tonumber(f[14]) or 0
local descendants, dependents = f[10] or '[]', f[15] or '[]'

--@include clock
--@include woke
if state == 'RUNNING' and f[9] == claimID then
  if cluster and (f[21] or '') ~= '' then
    -- A retried claim on a cluster: the slots first (limit_take.lua
    -- answers its own holder), then the lease; a slot lost meanwhile
    -- leaves the lease to run out and be taken over.
    if limitArg == '' then return {-31, f[21], f[9], f[12]} end
    if taken ~= '' then return {-2, tonumber(f[3])} end
  end
  local renewed = now + ttl
  local renewedS = int(renewed)
  rcall('HSET', nodeKey, 'lease_until', renewedS, 'heartbeat_at', nowS)
  rcall('ZADD', leaseKey, renewedS, ref)
  -- Everything the first answer had: the node's limits (the caller frees
  -- them at the attempt's end) and the waiters it woke that still hold
  -- the slot handed to them (noted under the claim id in field
  -- claim_woke, lib/woke.lua).
  local out = {1, tonumber(f[8]), tonumber(f[4]), renewed, f[11], f[12], f[13], timeoutMS,
    tonumber(f[6]), dependents, descendants, f[16] or '', f[17] or '', f[18] or '[]', f[20] or '', f[21] or ''}
  local again = wokeAgain(nodeKey, claimID, 'claim_woke')
  if again then out[#out + 1] = again end
  return out
end
if state == 'SUCCEEDED' or state == 'FAILED' or state == 'CANCELLED' then
  if cluster and (f[21] or '') ~= '' then return {-3, f[21]} end
  return -3
end
if state == 'BLOCKED' then return -5 end
if state == 'WAITING' then return -9 end

local prevOwner, prevEpoch = '', f[8]
if state == 'READY' then
  local readyAt = tonumber(f[2])
  if readyAt > now then return {-4, readyAt} end
elseif state == 'RUNNING' then
  local leaseUntil = tonumber(f[3])
  if leaseUntil + grace >= now then return {-2, leaseUntil} end
end
local limits = f[21] or ''
if limits ~= limitArg and not cluster then return {-31, limits} end
if state == 'RUNNING' then
  if rcall('HGET', runKey, 'cancel') == '1' then
    return {-7, tonumber(f[8]), f[9], f[7], descendants, limits}
  end
  if tonumber(f[4]) - releases >= tonumber(f[6]) then
    return {-6, tonumber(f[8]), f[9], f[7], descendants, limits}
  end
end
-- Routing: a worker that cannot run the kind leaves the node as it is.
if kinds ~= '' and not string.find(kinds, ',' .. f[11] .. ',', 1, true) then
  return {-8, f[11], f[12], tonumber(f[2]) or 0}
end
if limits ~= limitArg then return {-31, limits, f[9] or '', f[12]} end -- a cluster's first call
local wakes
if limits ~= '' then
--@include limits
  local got, key, x
  if cluster then
    -- The limits were taken in their own slots (limit_take.lua); what
    -- they gave is recorded as a single server's take would have been.
    local rk, delay = string.match(taken, '^rate:(.+):(%d+)$')
    local wk = string.match(taken, '^limit:(.+)$')
    if rk then
      got, key, x = 'rate', rk, now + tonumber(delay)
    elseif wk then
      got, key, x = 'wait', wk, {}
    else
      got, key = 'ok', {}
    end
  else
    local list = limitList(limits)
    if not limitKeysOK(list, 8, 3) or KEYS[6] == nil then return {-31, limits} end
    got, key, x = acquireLimits(list, 6, ref, f[12], claimID, now)
  end
  if got == 'rate' then
    rcall('HSET', nodeKey, 'ready_at', int(x), 'waits', 'rate:' .. key)
    rcall('ZADD', readyKey, int(x), ref)
    return {-4, x, key}
  elseif got == 'wait' then
    rcall('HSET', nodeKey, 'waits', 'limit:' .. key)
    rcall('ZADD', readyKey, int(now + limitRecheckMS), ref)
    -- The waiters handed a slot on the way are noted under the claim id:
    -- the same claim resent after a lost reply names them again.
    if #x > 0 then
      rcall('HSET', nodeKey, 'claim_woke', claimID .. ' ' .. table.concat(x, ' '))
    else
      x = wokeAgain(nodeKey, claimID, 'claim_woke') or {}
    end
    return {-32, key, x}
  end
  wakes = key
  if f[22] then rcall('HDEL', nodeKey, 'waits') end
end
if state == 'RUNNING' then
  local leaseUntil = tonumber(f[3])
  prevOwner = f[7]
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'heartbeat_lost',
    'node', nodeID, 'epoch', prevEpoch, 'worker', prevOwner, 'at', nowS,
    'lease_until', f[3], 'overdue_ms', int(now - leaseUntil))
end

-- The epoch only ever grows: it is raised only by a claim (here, and a
-- commit's continuation) and by retry.lua, which fences a re-run node.
local epoch = tonumber(f[8]) + 1
local attempt = tonumber(f[4]) + 1
local leaseUntil = now + ttl
local epochS, attemptS, leaseS = int(epoch), int(attempt), int(leaseUntil)
rcall('HSET', nodeKey, 'state', 'RUNNING', 'epoch', epochS, 'attempt', attemptS,
  'owner', worker, 'claim', claimID, 'lease_until', leaseS, 'started_at', nowS)
if prevOwner ~= '' then rcall('HSET', nodeKey, 'prev_owner', prevOwner) end
-- What an earlier attempt left (its takeover, how it ended) goes; a
-- default is not stored.
local old = {}
if prevOwner == '' and (f[16] or '') ~= '' then old[#old + 1] = 'prev_owner' end
if (f[19] or '') ~= '' then old[#old + 1] = 'end_op' end
if #old > 0 then rcall('HDEL', nodeKey, unpack(old)) end
rcall('ZADD', leaseKey, leaseS, ref)
rcall('ZREM', readyKey, ref)

if prevOwner ~= '' then
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'takeover',
    'node', nodeID, 'epoch', epochS, 'worker', worker, 'at', nowS,
    'attempt', attemptS, 'prev_owner', prevOwner, 'prev_epoch', prevEpoch)
else
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'claimed',
    'node', nodeID, 'epoch', epochS, 'worker', worker, 'at', nowS, 'attempt', attemptS)
end

local out = {1, epoch, attempt, leaseUntil, f[11], f[12], f[13], timeoutMS,
  tonumber(f[6]), dependents, descendants, prevOwner, f[17] or '', f[18] or '[]', f[20] or '', limits}
if wakes and #wakes > 0 then
  out[#out + 1] = wakes
  rcall('HSET', nodeKey, 'claim_woke', claimID .. ' ' .. table.concat(wakes, ' '))
end
return out
