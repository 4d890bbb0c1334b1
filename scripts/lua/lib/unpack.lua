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
