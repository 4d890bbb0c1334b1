--[[ checkpoint: save a checkpoint of a thread's state under a namespace.

Accepted only from the current claim (epoch and claim id) of a RUNNING node
of the run that is the thread's active run (a run without a thread is its
own thread, and always active). Anything else changes nothing, records
stale_rejected with op=checkpoint, and returns the fencing code: this is
the rule that keeps a paused worker from rolling a conversation back.

The version is assigned here, strictly increasing per thread and namespace,
and never reused, even after checkpoints are deleted. Per namespace:
  versions  zset  version -> version (the history, newest kept)
  data      hash  "<v>:d" data, "<v>:m" metadata, "<v>:i" the record
                  (JSON: id, parent, run, node, epoch, worker, at),
                  "<v>:w" the pending-write fields of that checkpoint,
                  "anchor" and "anchor_w" (lib/anchor.lua)
  ids       hash  checkpoint id -> version
  writes    hash  "<v>|<task>|<idx>" -> pending write (see checkpoint_writes)
A retry with the same checkpoint id from the same claim (its reply was lost)
returns the version it saved and changes nothing, even once the node was
taken over or the run ended: the replay is recognised before the fence.

The newest N are kept (ARGV[12]), and one more: the anchor of the run that
writes (lib/anchor.lua), the newest checkpoint from before its first write
to the namespace, so that a rollback of the run (lib/rollback.lua) finds
the state from before it whatever N is. The namespace's keys and the
thread's counters get the retention from this write (ARGV[13]), so a
counter never expires before what it numbers.

KEYS[1] node hash
KEYS[2] run event stream
KEYS[3] the thread's active-run key
KEYS[4] the thread's checkpoint hash (ns -> last version assigned)
KEYS[5] the namespace's versions zset
KEYS[6] the namespace's data hash
KEYS[7] the namespace's ids hash
KEYS[8] the namespace's pending writes hash
KEYS[9] the run's packed key: a write to a node of a run packed into
        one key (retain.lua) is refused, and recorded, as the fence check
        below would (lib/packed_fence.lua). Callers that pass 8 keys (the
        savers in other languages) get -1 for such a node, as before

ARGV[1]  node id
ARGV[2]  run id
ARGV[3]  thread id
ARGV[4]  worker id
ARGV[5]  epoch the caller claimed under
ARGV[6]  claim id the caller claimed under
ARGV[7]  namespace
ARGV[8]  checkpoint id (made by the caller; the same on a retry)
ARGV[9]  parent checkpoint id, or ""
ARGV[10] data (JSON text, stored verbatim)
ARGV[11] metadata (JSON text, stored verbatim)
ARGV[12] history: keep the newest N checkpoints of the namespace
ARGV[13] thread retention, ms, counted from this write; 0 keeps them
ARGV[14] size cap of data + metadata, bytes
ARGV[15] event stream MAXLEN (approximate)

Returns
  {1, version, at_ms}  saved
  {2, version, at_ms}  this claim had saved this checkpoint id already (a retry)
  -1   node missing
  -10  stale epoch: the node was claimed again since
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING
  -14  the run is not the thread's active run
  -15  data and metadata are larger than the cap
]]
local rcall = redis.call
local nodeKey, evKey, activeKey, threadKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local versionsKey, dataKey, idsKey, writesKey = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local nodeID, runID, thread, worker, epoch, claimID = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local ns, id, parent, data, meta = ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local keep, retention, cap, maxlen = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14]), ARGV[15]

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim')
if not f[1] and not KEYS[9] then return -1 end
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

--@include fence_check
if not f[1] then -- packed, or gone
--@include pack
--@include unpack
--@include packed_fence
  return packedRefusal(KEYS[9], 'checkpoint', 'ns', ns)
end
--@include anchor
local function refuse(code) return rejectWrite('checkpoint', code, f[2], 'ns', ns) end

-- A retry of a save this claim made (its reply was lost) answers as the
-- first time, before the fence: the node may have been taken over or the
-- run ended since, and the write was stored all the same.
local existing = rcall('HGET', idsKey, id)
if existing then
  local rec = cjson.decode(rcall('HGET', dataKey, existing .. ':i') or '{}')
  if rec.run == runID and rec.node == nodeID and tostring(rec.epoch) == epoch and rec.claim == claimID then
    return {2, tonumber(existing), rec.at}
  end
end
local stale = staleCode(f[2], f[3], 'checkpoint', 'ns', ns)
if stale then return stale end
if f[1] ~= 'RUNNING' then return refuse(-12) end
local active = rcall('GET', activeKey)
if active ~= runID and not (active == false and thread == runID) then return refuse(-14) end
if #data + #meta > cap then return -15 end

local anchor = anchorOf(dataKey, versionsKey, runID)
local version = rcall('HINCRBY', threadKey, ns, 1)
local v = tostring(version)
rcall('ZADD', versionsKey, version, v)
rcall('HSET', dataKey, v .. ':d', data, v .. ':m', meta, v .. ':i', cjson.encode({
  id = id, parent = parent, run = runID, node = nodeID, epoch = tonumber(epoch),
  claim = claimID, worker = worker, at = now}))
rcall('HSET', idsKey, id, v)
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'checkpointed',
  'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now, 'ns', ns, 'version', version)

-- Keep the newest `keep`, and the run's anchor: drop older records, their
-- id and their writes.
local over = rcall('ZCARD', versionsKey) - keep
if anchor ~= '0' and rcall('ZSCORE', versionsKey, anchor) then over = over - 1 end
if over > 0 then
  local dropped = {}
  for _, old in ipairs(rcall('ZRANGE', versionsKey, 0, over)) do
    if #dropped == over then break end
    if old ~= anchor then
      dropped[#dropped + 1] = old
      local rec = rcall('HGET', dataKey, old .. ':i')
      if rec then
        local oldID = cjson.decode(rec).id
        if rcall('HGET', idsKey, oldID) == old then rcall('HDEL', idsKey, oldID) end
      end
      local w = rcall('HGET', dataKey, old .. ':w')
      if w then
        for _, field in ipairs(cjson.decode(w)) do rcall('HDEL', writesKey, field) end
      end
      rcall('HDEL', dataKey, old .. ':d', old .. ':m', old .. ':i', old .. ':w')
    end
  end
  if #dropped > 0 then rcall('ZREM', versionsKey, unpack(dropped)) end
end

-- The namespace's keys and the thread's counters get the retention from
-- this write: a counter never expires before what it numbers.
if retention > 0 then
  for i = 4, 8 do rcall('PEXPIRE', KEYS[i], retention) end
end
return {1, version, now}
