--[[ checkpoint_delete: delete a thread's checkpoints, or those one run wrote.

mode "thread": every checkpoint of the thread, in every namespace; refused
while the thread has an active run that has not finished.
mode "run": the checkpoints ARGV[2] wrote (the newest of each namespace,
back to the first written by another run), so the thread's state is what it
was before that run: a rollback. Versions are never reused.
mode "lease": every checkpoint of the thread, as "thread", but from inside
the thread's active run (a saver's deleteThread): accepted only from the
current claim of a RUNNING node of that run, fenced exactly as
checkpoint.lua. Anything else changes nothing, records stale_rejected with
op=checkpoint_delete, and returns the fencing code.

KEYS[1]   the thread's active-run key
KEYS[2]   hash of the run ARGV[3] names (any key of the thread when none)
KEYS[3]   the thread's checkpoint hash (ns -> last version assigned)
KEYS[4]   mode lease: the caller's node hash (else any key of the thread)
KEYS[5]   mode lease: the caller's run event stream (else any key of the
          thread)
KEYS[6..] per namespace of ARGV[10..], four keys: versions zset, data hash,
          ids hash, pending writes hash

ARGV[1]   mode: thread | run | lease
ARGV[2]   run id (modes run and lease)
ARGV[3]   the thread's active run id as the caller read it ("" if none)
ARGV[4]   mode lease: thread id
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
if mode ~= 'thread' and mode ~= 'run' and mode ~= 'lease' then
  return redis.error_reply('checkpoint_delete: unknown mode ' .. tostring(mode))
end

-- fence_check: the fence check every term-scoped write makes, kept in one
-- place. A script includes it after defining the locals it reads: rcall,
-- evKey, maxlen, nodeID, worker, epoch and claimID (the caller's), now.
--
-- rejectWrite appends stale_rejected for op (with any extra field pairs)
-- to the run's events and returns code, for the script to return.
local function rejectWrite(op, code, storedEpoch, ...)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'stale_rejected',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now,
    'op', op, 'current_epoch', storedEpoch, ...)
  return code
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
if mode == 'thread' and expectedActive ~= '' then
  local st = rcall('HGET', activeRunKey, 'status')
  if st == 'RUNNING' or st == 'PENDING' then return {-21, expectedActive} end
end

local deleted = 0
for i = firstNS, #ARGV do
  local k = 6 + (i - firstNS) * 4
  local versionsKey, dataKey, idsKey, writesKey = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  if mode == 'thread' or mode == 'lease' then
    deleted = deleted + rcall('ZCARD', versionsKey)
    rcall('DEL', versionsKey, dataKey, idsKey, writesKey)
  else
    for _, v in ipairs(rcall('ZREVRANGE', versionsKey, 0, -1)) do
      local rec = rcall('HGET', dataKey, v .. ':i')
      if not rec then break end
      rec = cjson.decode(rec)
      if rec.run ~= runID then break end
      if rcall('HGET', idsKey, rec.id) == v then rcall('HDEL', idsKey, rec.id) end
      local w = rcall('HGET', dataKey, v .. ':w')
      if w then
        for _, field in ipairs(cjson.decode(w)) do rcall('HDEL', writesKey, field) end
      end
      rcall('HDEL', dataKey, v .. ':d', v .. ':m', v .. ':i', v .. ':w')
      rcall('ZREM', versionsKey, v)
      deleted = deleted + 1
    end
  end
end
-- The thread's hash of counters stays, so a version is never reused.
return {1, deleted}
