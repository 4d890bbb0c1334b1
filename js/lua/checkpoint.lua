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
if not f[1] then -- packed, or gone
-- pack: one finished run's keys (run hash, node hashes, event stream) as
-- one string, small enough that a retained run costs less Redis memory
-- than its three kinds of keys: each key costs Redis 100-150 B of its own
-- (its entry, name, time to live) before any data, and a stream or a hash
-- more again. fence/packed.go reads it back, value for value: every hash
-- field and every stream entry (id, fields in order) comes back as stored,
-- whatever its name, so a field added to a script later is kept without a
-- change here. A script includes it after defining rcall.
--
-- Layout, version 1 (varint: 7 bits a byte, low first, high bit = more):
--   byte 1              version (1)
--   varint              base: the run's created_at (ms), 0 when absent
--   record              the run hash
--   varint n, n records the node hashes, in the order given
--   varint n, n events  each: varint zigzag(id ms - base), varint id seq,
--                       an event record
-- A record is varint n, then n (name, value) pairs of values. An event
-- record is the same with n doubled; or, for an entry whose first fields
-- are type, node, epoch, worker and at, in that order (every event the
-- scripts write), varint 2m+1, those five values without their names, and
-- m further pairs. A value is a varint header h:
--   h odd   the text at index (h-1)/2 of the table: packDict first, then
--           every text and hex value met so far, in order
--   h even  k = h/2, tag = k % 4 and arg = (k - tag)/4:
--     0  text of arg bytes follows; it joins the table
--     1  arg bytes follow, read as lower-case hex (claim ids, digests);
--        the hex text joins the table
--     2  the integer zigzag(arg) (a decimal text without leading zeros)
--     3  the integer base + zigzag(arg) (a time in ms)
-- zigzag maps 0, -1, 1, -2, ... to 0, 1, 2, 3, ...
--
-- packDictionary returns the names and values nearly every run stores,
-- most frequent first (an index under 64 takes one byte). It is part of
-- the format: a change needs a new version. lib/unpack.lua includes this
-- file for it, and fence/packed.go reads it from here, between the
-- markers. A function, so that a script that includes this file but packs
-- nothing does not build the table.

local function packDictionary() return { -- @dict
  'status', 'nodes', 'total', 'terminal', 'created_at', 'start_at', 'finished_at', 'digest', 'inc',
  'state', 'kind', 'queue', 'input', 'max_attempts', 'attempt', 'epoch', 'owner', 'claim',
  'started_at', 'result', 'error', 'deps', 'releases', 'end_op', 'ready_at',
  'type', 'node', 'worker', 'at',
  'SUCCEEDED', 'FAILED', 'CANCELLED', 'noop', 'default', 'null', '{}', '[]', '',
  'submitted', 'claimed', 'committed', 'run_finished', 'failed', 'cancelled', 'released',
  'retry_scheduled', 'takeover', 'progress', 'trace', 'cancel', 'cancel_reason', 'exec',
  'http', 'reason', 'prev_owner', 'retried',
} end -- @enddict

local packIndex, packNext, packOut, packN = {}, 0, {}, 0
local packChar = string.char

-- packVarint appends n. Most are headers and small numbers under 128, one
-- byte: they take no table of their own.
local function packVarint(n)
  packN = packN + 1
  if n < 128 then
    packOut[packN] = packChar(n)
    return
  end
  local b = {}
  while n >= 128 do
    local low = n % 128
    b[#b + 1] = packChar(low + 128)
    n = (n - low) / 128
  end
  b[#b + 1] = packChar(n)
  packOut[packN] = table.concat(b)
end

local function packZigzag(n)
  if n < 0 then return 2 * (0 - n) - 1 end
  return 2 * n
end

local packBase = 0

local packByte, packFind, packSub = string.byte, string.find, string.sub

local function packValue(v)
  local ref = packIndex[v]
  if ref then
    if ref < 64 then -- the header in one byte, no call
      packN = packN + 1
      packOut[packN] = packChar(ref * 2 + 1)
    else
      packVarint(ref * 2 + 1)
    end
    return
  end
  local n = #v
  local c = packByte(v, 1) or 0
  -- A decimal integer starts with a digit or "-": only such a text is
  -- matched against the pattern.
  if n <= 15 and (c == 45 or (c >= 48 and c <= 57)) and (v == '0' or packFind(v, '^%-?[1-9]%d*$')) then
    local x = tonumber(v)
    if x >= 1e12 and packBase > 0 then
      packVarint((packZigzag(x - packBase) * 4 + 3) * 2)
    else
      packVarint((packZigzag(x) * 4 + 2) * 2)
    end
    return
  end
  if n >= 8 and n % 2 == 0 and not packFind(v, '[^0-9a-f]') then
    packVarint((n / 2 * 4 + 1) * 2)
    local b = {}
    for i = 1, n, 2 do b[#b + 1] = tonumber(packSub(v, i, i + 1), 16) end
    packN = packN + 1
    packOut[packN] = packChar(unpack(b))
  else
    packVarint(n * 8)
    packN = packN + 1
    packOut[packN] = v
  end
  packIndex[v] = packNext
  packNext = packNext + 1
end

-- packRecord appends a flat list of names and values (HGETALL's reply).
local function packRecord(flat)
  packVarint(#flat / 2)
  for i = 1, #flat do packValue(flat[i]) end
end

local packEventFields = {'type', 'node', 'epoch', 'worker', 'at'}

-- packEvent appends a stream entry's flat list of names and values.
local function packEvent(flat)
  local usual = #flat >= 10
  for i = 1, 5 do
    if usual and flat[2 * i - 1] ~= packEventFields[i] then usual = false end
  end
  if not usual then
    packVarint(#flat)
    for i = 1, #flat do packValue(flat[i]) end
    return
  end
  packVarint(#flat - 10 + 1)
  for i = 1, 5 do packValue(flat[2 * i]) end
  for i = 11, #flat do packValue(flat[i]) end
end

-- packRun returns the run hash runKey, the node hashes nodeKeys (in that
-- order) and the event stream evKey as one string (the layout above).
local function packRun(runKey, nodeKeys, evKey)
  local dict = packDictionary()
  for i, v in ipairs(dict) do
    if packIndex[v] == nil then packIndex[v] = i - 1 end
  end
  packNext = #dict
  local run = rcall('HGETALL', runKey)
  packBase = 0
  for i = 1, #run, 2 do
    if run[i] == 'created_at' then packBase = tonumber(run[i + 1]) or 0 end
  end
  packN = packN + 1
  packOut[packN] = packChar(1)
  packVarint(packBase)
  packRecord(run)
  packVarint(#nodeKeys)
  for _, key in ipairs(nodeKeys) do packRecord(rcall('HGETALL', key)) end
  local events = rcall('XRANGE', evKey, '-', '+')
  packVarint(#events)
  for _, e in ipairs(events) do
    local dash = string.find(e[1], '-', 1, true)
    packVarint(packZigzag(tonumber(string.sub(e[1], 1, dash - 1)) - packBase))
    packVarint(tonumber(string.sub(e[1], dash + 1)))
    packEvent(e[2])
  end
  return table.concat(packOut)
end
-- unpack: the run hash and node hashes of a run packed by lib/pack.lua
-- (included before this), for the scripts that meet a packed run and need
-- its status, digest or a node's epoch and claim. Its events are read
-- back by Go (fence/packed.go), never by a script.

-- unpackRun returns the run hash packed in s as a table of field -> value
-- and, when withNodes, a list of the node hashes as such tables, in the
-- run's node order, and the ms and seq of its last event's stream id;
-- with withEvents also, fifth, its events as {id, {name, value, ...}},
-- in order. nil when s is not a packed run of a known version.
local function unpackRun(s, withNodes, withEvents)
  if type(s) ~= 'string' or string.byte(s, 1) ~= 1 then return nil end
  local texts, pos = packDictionary(), 2
  local function varint()
    local n, mul = 0, 1
    while true do
      local c = string.byte(s, pos)
      if not c then return nil end
      pos = pos + 1
      if c < 128 then return n + c * mul end
      n, mul = n + (c - 128) * mul, mul * 128
    end
  end
  local function unzigzag(n)
    if n % 2 == 1 then return -(n + 1) / 2 end
    return n / 2
  end
  local base = varint()
  local function value()
    local h = varint()
    if not h then return nil end
    if h % 2 == 1 then return texts[(h - 1) / 2 + 1] end
    local k = h / 2
    local tag = k % 4
    local arg = (k - tag) / 4
    if tag == 2 then return string.format('%d', unzigzag(arg)) end
    if tag == 3 then return string.format('%d', base + unzigzag(arg)) end
    local raw = string.sub(s, pos, pos + arg - 1)
    if #raw ~= arg then return nil end
    pos = pos + arg
    if tag == 1 then
      raw = string.gsub(raw, '.', function(c) return string.format('%02x', string.byte(c)) end)
    end
    texts[#texts + 1] = raw
    return raw
  end
  local function record()
    local n = varint()
    if not n then return nil end
    local out = {}
    for _ = 1, n do
      local name, v = value(), value()
      if not name or not v then return nil end
      out[name] = v
    end
    return out
  end
  if not base then return nil end
  local run = record()
  if not run or not withNodes then return run end
  local nodes, n = {}, varint()
  for i = 1, n or 0 do
    nodes[i] = record()
    if not nodes[i] then return nil end
  end
  -- The last event's stream id, as ms and seq: read through the events.
  local lastMs, lastSeq = 0, 0
  local events = {}
  for _ = 1, varint() or 0 do
    local ms, seq, m = varint(), varint(), varint()
    if not ms or not seq or not m then return nil end
    lastMs, lastSeq = base + unzigzag(ms), seq
    local usual = m % 2 == 1
    if usual then m = m + 4 end -- five unnamed values, then (m-1)/2 pairs
    local flat = {}
    for i = 1, m do
      local v = value()
      if not v then return nil end
      if withEvents then
        if usual and i <= 5 then flat[#flat + 1] = packEventFields[i] end
        flat[#flat + 1] = v
      end
    end
    if withEvents then
      events[#events + 1] = {string.format('%d-%d', lastMs, lastSeq), flat}
    end
  end
  return run, nodes, lastMs, lastSeq, events
end

-- unpackRunFields returns the run hash packed in s (unpackRun).
local function unpackRunFields(s) return unpackRun(s, false) end
-- packed_fence: the fence for a write to a node of a run packed into one
-- key (lib/pack.lua), shared by packed_fence.lua and checkpoint.lua. A
-- script includes it after lib/pack.lua, lib/unpack.lua and
-- lib/fence_check.lua (and the locals that one reads).

-- packedRefusal answers a write (op, by the caller: nodeID, worker, epoch,
-- claimID) to a node of the run packed under packedKey as the fence check
-- would from the node's stored epoch and claim. A refusal is recorded by
-- rejectWrite, with the fields in ..., in evKey: the run's stream, made
-- again after the packing, its first id after the packed events', with
-- the packed key's time to live. Returns 2 (a commit of the claim that
-- committed the node), -1 (no packed run or node), -10, -11 or -12 (see
-- packed_fence.lua).
local function packedRefusal(packedKey, op, ...)
  local _, nodes, lastMs, lastSeq = unpackRun(rcall('GET', packedKey), true)
  if not nodes then return -1 end
  local run = unpackRunFields(rcall('GET', packedKey))
  local node
  for i, id in ipairs(cjson.decode(run.nodes or '[]')) do
    if id == nodeID then node = nodes[i] end
  end
  if not node then return -1 end

  local code = -12
  if node.epoch ~= epoch then
    code = -10
  elseif node.claim ~= claimID then
    code = -11
  elseif op == 'commit' and node.state == 'SUCCEEDED' then
    return 2
  end
  if code == -12 and op ~= 'checkpoint' and op ~= 'checkpoint_writes' then return code end

  local fresh = rcall('EXISTS', evKey) == 0
  -- In the same ms as the last packed event, an id Redis would make for a
  -- new stream could come before it.
  local id = '*'
  if fresh and tonumber(now) <= lastMs then id = string.format('%d-%d', lastMs, lastSeq + 1) end
  rejectWriteAt(id, op, code, node.epoch or '0', ...)
  if fresh then
    local ttl = rcall('PTTL', packedKey)
    if ttl > 0 then rcall('PEXPIRE', evKey, ttl) end
  end
  return code
end
  return packedRefusal(KEYS[9], 'checkpoint', 'ns', ns)
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
