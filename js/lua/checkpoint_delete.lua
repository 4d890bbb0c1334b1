--[[ checkpoint_delete: delete a thread's checkpoints.

mode "thread": every checkpoint of the thread, in every namespace, with
their pending writes; refused while the thread's active run is RUNNING (a
run without a thread is the active run of the thread of its id while the
active-run key is absent). Versions are never reused. (A rollback removes
only what one run wrote: promote.lua, lib/rollback.lua.)
mode "lease": every checkpoint of the thread, as "thread", but from inside
the thread's active run (a saver's deleteThread): accepted only from the
current claim of a RUNNING node of that run, fenced exactly as
checkpoint.lua. Anything else changes nothing, records stale_rejected with
op=checkpoint_delete, and returns the fencing code.

KEYS[1]   the thread's active-run key
KEYS[2]   hash of the run ARGV[3] names; when ARGV[3] is "", the hash of
          the run whose id is the thread
KEYS[3]   the thread's checkpoint hash (ns -> last version assigned)
KEYS[4]   mode lease: the caller's node hash (else any key of the thread)
KEYS[5]   mode lease: the caller's run event stream (else any key of the
          thread)
KEYS[6..] per namespace of ARGV[10..], four keys: versions zset, data hash,
          ids hash, pending writes hash

ARGV[1]   mode: thread | lease
ARGV[2]   run id (mode lease)
ARGV[3]   the thread's active run id as the caller read it ("" if none)
ARGV[4]   thread id
ARGV[5]   mode lease: node id
ARGV[6]   mode lease: worker id
ARGV[7]   mode lease: epoch the caller claimed under
ARGV[8]   mode lease: claim id the caller claimed under
ARGV[9]   event stream MAXLEN (approximate)
ARGV[10..] every namespace of the thread, as the caller read them

Returns
  {1, deleted}  how many checkpoints were deleted
  {-21, active_run_id}  mode thread: the thread's active run has not finished
  -23  the active run or the namespaces changed since the caller read them:
       read again and retry
  -1   mode lease: node missing
  -10  mode lease: stale epoch: the node was claimed again since
  -11  mode lease: not owner: same epoch, another claim id
  -12  mode lease: the caller's claim is no longer RUNNING
  -14  mode lease: the run is not the thread's active run
]]
local rcall = redis.call
local activeKey, activeRunKey, threadKey = KEYS[1], KEYS[2], KEYS[3]
local mode, runID, expectedActive = ARGV[1], ARGV[2], ARGV[3]
local nodeKey, evKey = KEYS[4], KEYS[5]
local thread, nodeID, worker, epoch, claimID, maxlen = ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local firstNS = 10 -- ARGV[firstNS..] are the namespaces
local now
if mode ~= 'thread' and mode ~= 'lease' then
  return redis.error_reply('checkpoint_delete: unknown mode ' .. tostring(mode))
end

-- fence_check: the fence check every term-scoped write makes, kept in one
-- place. A script includes it after defining the locals it reads: rcall,
-- evKey, maxlen, nodeID, worker, epoch and claimID (the caller's), now.
--
-- rejectWriteAt appends stale_rejected for op (with any extra field
-- pairs) to the run's events under stream id id ('*': Redis's) and
-- returns code, for the script to return; rejectWrite with Redis's id.
local function rejectWriteAt(id, op, code, storedEpoch, ...)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, id, 'type', 'stale_rejected',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now,
    'op', op, 'current_epoch', storedEpoch, ...)
  return code
end

local function rejectWrite(op, code, storedEpoch, ...)
  return rejectWriteAt('*', op, code, storedEpoch, ...)
end

-- staleCode compares the caller's epoch and claim id with the node's
-- stored ones. It returns nil when the caller holds the node's current
-- claim; else it records the refusal and returns -10 (the node was claimed
-- again since) or -11 (the same epoch under another claim id, as after a
-- failover lost a claim).
local function staleCode(storedEpoch, storedClaim, op, ...)
  if storedEpoch ~= epoch then return rejectWrite(op, -10, storedEpoch, ...) end
  if storedClaim ~= claimID then return rejectWrite(op, -11, storedEpoch, ...) end
  return nil
end
if mode == 'lease' then
  local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim')
  if not f[1] then return -1 end
  local t = rcall('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local stale = staleCode(f[2], f[3], 'checkpoint_delete')
  if stale then return stale end
  if f[1] ~= 'RUNNING' then return rejectWrite('checkpoint_delete', -12, f[2]) end
  local active = rcall('GET', activeKey)
  if active ~= runID and not (active == false and thread == runID) then
    return rejectWrite('checkpoint_delete', -14, f[2])
  end
end

if (rcall('GET', activeKey) or '') ~= expectedActive then return -23 end
if rcall('HLEN', threadKey) ~= #ARGV - firstNS + 1 then return -23 end
if mode == 'thread' and rcall('HGET', activeRunKey, 'status') == 'RUNNING' then
  local active = expectedActive
  if active == '' then active = ARGV[4] end
  return {-21, active}
end

local deleted = 0
for i = firstNS, #ARGV do
  local k = 6 + (i - firstNS) * 4
  deleted = deleted + rcall('ZCARD', KEYS[k])
  rcall('DEL', KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3])
end
-- The thread's hash of counters stays, so a version is never reused.
return {1, deleted}
