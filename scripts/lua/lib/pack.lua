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
