--[[ checkpoint_writes: store pending writes of one task against a checkpoint.

LangGraph's putWrites: the writes a task produced while the step after a
checkpoint ran, kept so a resumed step does not run that task again. Fenced
exactly as checkpoint.lua: only the current claim of a RUNNING node of the
thread's active run. A write with idx >= 0 is kept once (a retry or a
replayed task does not overwrite it); idx < 0 (LangGraph's special
channels: errors, interrupts) overwrites.

KEYS[1] node hash
KEYS[2] run event stream
KEYS[3] the thread's active-run key
KEYS[4] the thread's checkpoint hash (ns -> last version assigned)
KEYS[5] the namespace's versions zset
KEYS[6] the namespace's data hash
KEYS[7] the namespace's ids hash
KEYS[8] the namespace's pending writes hash

ARGV[1]  node id
ARGV[2]  run id
ARGV[3]  thread id
ARGV[4]  worker id
ARGV[5]  epoch the caller claimed under
ARGV[6]  claim id the caller claimed under
ARGV[7]  namespace
ARGV[8]  checkpoint id the writes belong to
ARGV[9]  task id
ARGV[10] writes: JSON array of [idx, write] pairs; write is JSON text kept
         verbatim
ARGV[11] thread retention, ms, counted from this write; 0 keeps them
ARGV[12] size cap of all the writes together, bytes
ARGV[13] event stream MAXLEN (approximate)

Writes belong to the run that stored them: a rollback of the run removes
them (lib/anchor.lua, lib/rollback.lua). The namespace's keys and the
thread's counters get the retention from this write (ARGV[11]), so a
counter never expires before what it numbers. A retry
of writes the same claim stored (its reply was lost) finds every write
stored with the same value and answers {2, 0}, before the fence.

Returns
  {1, stored}  stored: how many writes were new or overwritten
  {2, 0}       a retry: every write was stored already (by this claim,
               or with the same values)
  -1   node missing
  -10  stale epoch: the node was claimed again since
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING
  -14  the run is not the thread's active run
  -15  the writes are larger than the cap
  -16  no checkpoint with that id in the namespace
]]
local rcall = redis.call
local nodeKey, evKey, activeKey = KEYS[1], KEYS[2], KEYS[3]
local versionsKey, dataKey, idsKey, writesKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local nodeID, runID, thread, worker, epoch, claimID = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local ns, id, task, writes = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local retention, cap, maxlen = tonumber(ARGV[11]), tonumber(ARGV[12]), ARGV[13]

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim')
if not f[1] then return -1 end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

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
-- anchor: the checkpoint a run's rollback goes back to, for checkpoint.lua
-- and checkpoint_writes.lua. A script includes it after defining rcall.
--
-- A namespace's data hash keeps, beside the versions' fields, the anchor
-- of the run that wrote last: field "anchor" = "<run>|<version>", the
-- newest version from before that run's first write in the namespace ("0":
-- none), and field "anchor_w" = JSON array of the pending-write fields the
-- run stored against checkpoints it did not write. Trimming spares the
-- anchor's version (checkpoint.lua), and a rollback (lib/rollback.lua)
-- removes what the anchor's run wrote back to it, so a rollback restores
-- the state from before the run whatever the history cap.
--
-- anchorOf(dataKey, versionsKey, run) returns the run's anchor version
-- (text), setting it at the run's first write to the namespace; an earlier
-- run's anchor can no longer be rolled back to and is replaced.
local function anchorOf(dataKey, versionsKey, run)
  local a = rcall('HGET', dataKey, 'anchor')
  if a then
    local r, v = string.match(a, '^(.*)|(%d+)$')
    if r == run then return v end
  end
  local top = rcall('ZREVRANGE', versionsKey, 0, 0)
  local v = top[1] or '0'
  rcall('HSET', dataKey, 'anchor', run .. '|' .. v)
  rcall('HDEL', dataKey, 'anchor_w')
  return v
end
local function refuse(code) return rejectWrite('checkpoint_writes', code, f[2], 'ns', ns) end
local v = rcall('HGET', idsKey, id)
local list = cjson.decode(writes)

-- A retry of writes this claim stored (its reply was lost) answers as
-- stored, before the fence, also once the node was taken over or ended:
-- every write is there with the same value.
local function stored()
  if not v or #list == 0 then return false end
  for _, w in ipairs(list) do
    if rcall('HGET', writesKey, v .. '|' .. task .. '|' .. w[1]) ~= w[2] then return false end
  end
  return true
end

if (f[1] ~= 'RUNNING' or f[2] ~= epoch or f[3] ~= claimID) and stored() then return {2, 0} end
local stale = staleCode(f[2], f[3], 'checkpoint_writes', 'ns', ns)
if stale then return stale end
if f[1] ~= 'RUNNING' then return refuse(-12) end
local active = rcall('GET', activeKey)
if active ~= runID and not (active == false and thread == runID) then return refuse(-14) end
if #writes > cap then return -15 end
if not v then return -16 end

-- Writes belong to the run that stored them: those against a checkpoint
-- of an earlier run are listed on the run's anchor, so a rollback of the
-- run removes them too (lib/rollback.lua).
anchorOf(dataKey, versionsKey, runID)
local target = cjson.decode(rcall('HGET', dataKey, v .. ':i') or '{}')
local foreign = target.run ~= runID
local mine = {}
if foreign then mine = cjson.decode(rcall('HGET', dataKey, 'anchor_w') or '[]') end

local fields = cjson.decode(rcall('HGET', dataKey, v .. ':w') or '[]')
local known = {}
for _, field in ipairs(fields) do known[field] = true end
local count = 0
for _, w in ipairs(list) do
  local idx, value = w[1], w[2]
  local field = v .. '|' .. task .. '|' .. idx
  local n
  if idx < 0 then
    n = 1
    rcall('HSET', writesKey, field, value)
  else
    n = rcall('HSETNX', writesKey, field, value)
  end
  count = count + n
  if not known[field] then
    known[field] = true
    fields[#fields + 1] = field
    if foreign then mine[#mine + 1] = field end
  end
end
rcall('HSET', dataKey, v .. ':w', cjson.encode(fields))
if foreign and #mine > 0 then rcall('HSET', dataKey, 'anchor_w', cjson.encode(mine)) end
-- The namespace's keys and the thread's counters get the retention from
-- this write: the writes never outlive the counter that numbers their
-- checkpoints.
if retention > 0 then
  for i = 4, 8 do rcall('PEXPIRE', KEYS[i], retention) end
end
return {1, count}
