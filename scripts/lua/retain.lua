--[[ retain: give one finished run's keys their time to live, store its
event stream at its real size, and take the run off its shard's finished
index. Called by the retention sweep, never on a node's path.

One script per run, not a command per key: a runner ending 2,000 runs a
second retains them all, and each command it saves is one the claims and
commits around it do not wait behind.

A run that is no longer in the finished index was retained already, or
re-opened by retry.lua since the caller read the index: nothing changes.

How a run's keys are retained (slimmed, given their time to live, the
stream stored at its size) is lib/retain_run.lua, shared with commit.lua.

A run that SUCCEEDED or FAILED is packed instead: its run hash, node
hashes and event stream become one string (lib/pack.lua), stored under
its packed key with the time to live (none when kept forever), and those
keys are deleted. One key instead of two plus one per node holds about a
quarter of the memory (docs/performance.md). Readers in Go read it back
(fence/packed.go); the scripts that meet a run by id (submit.lua,
locator.lua, delete.lua) read its run hash from it (lib/unpack.lua); a
late write to one of its nodes finds no node hash, and packed_fence.lua
answers it as the node's fence would. A SUCCEEDED run never changes again
(retry.lua refuses it). A FAILED one is slimmed of nothing, and retry.lua
writes it back as its keys, value for value, in the step that re-runs it.
A CANCELLED run keeps its keys: the promotion that applies a rollback
marks the rolled-back run, which is a cancelled one, in its hash.

A run of a thread has its locator in another slot, out of this script's
reach: the script puts the bare run id in the finished index in the run's
place, and the caller gives the locator its time to live, then takes the
id off. An id that a lost reply or a crash left behind is read with the
rest of the index by the next pass, so no locator outlives its run.

KEYS[1]   finished index (zset: "thread:run:" -> ms when the run ended;
          a bare "run": its locator still wants its time to live)
KEYS[2]   run hash
KEYS[3]   run event stream
KEYS[4]   the run's packed key (string; written for a SUCCEEDED or FAILED
          run)
KEYS[5..] the run's node hashes (ARGV[4] of them), then, for a run
          without a thread, its locator (only runs stored before such
          runs stopped having one have it), then the last ARGV[7] keys:
          the run's chunk stream and its state (stream_append.lua), which
          get the run's time to live (deleted at 0) and are never packed

ARGV[1] time to live, ms; 0: delete now; -1: keep forever
ARGV[2] the run's member of the finished index ("thread:run:")
ARGV[3] the run id when its locator is in another slot and needs the time
        to live; empty otherwise
ARGV[4] how many node hashes follow KEYS[4]
ARGV[5] the run packed by the caller from what it read of these keys
        (fence/pack.go, this layout), or "" to pack it here
ARGV[6] what the caller read: the stream's last entry id, then the
        number of fields of the run hash and of each node hash
        ("ID|N|N1,N2"); ARGV[5] is stored only if that is still so, else
        the run is packed here. Encoding in Go, not Lua, spares Redis's one
        thread most of a packing's cost.
ARGV[7] how many of the last keys are the run's chunk stream keys; ""
        or absent: none

Returns
  1  retained
  0  not in the finished index: nothing changed
]]
local rcall = redis.call
local finKey, runKey, evKey, packedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl, member, elsewhere = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local nodes = tonumber(ARGV[4]) or 0
local given, read = ARGV[5] or '', ARGV[6] or ''
local streams = tonumber(ARGV[7]) or 0

--@include stream
--@include retain_run
--@include pack

local ended = rcall('ZSCORE', finKey, member)
if not ended then return 0 end
if ttl == 0 then
  rcall('DEL', runKey, evKey, packedKey)
  for i = 5, #KEYS do rcall('DEL', KEYS[i]) end
else
  local nodeKeys, otherKeys = {}, {}
  local r = rcall('HMGET', runKey, 'status', 'id')
  for i = 5, #KEYS do
    if i <= 4 + nodes then
      nodeKeys[#nodeKeys + 1] = KEYS[i]
    elseif i > #KEYS - streams then -- the chunk stream: the run's time to live
      otherKeys[#otherKeys + 1] = KEYS[i]
    elseif r[2] then -- a run without a thread has a locator only if stored with its id
      otherKeys[#otherKeys + 1] = KEYS[i]
    end
  end
  if r[1] == 'SUCCEEDED' or r[1] == 'FAILED' then
    local packed = given
    if packed ~= '' then
      local last = rcall('XREVRANGE', evKey, '+', '-', 'COUNT', 1)
      local lens = {}
      for i, key in ipairs(nodeKeys) do lens[i] = rcall('HLEN', key) end
      local now = ((last[1] and last[1][1]) or '') .. '|' .. rcall('HLEN', runKey) .. '|' .. table.concat(lens, ',')
      if now ~= read then packed = '' end -- changed since it was read
    end
    if packed == '' then
      if r[1] == 'SUCCEEDED' then slimSucceeded(runKey, nodeKeys, false) end
      packed = packRun(runKey, nodeKeys, evKey)
    end
    rcall('DEL', runKey, evKey)
    for _, key in ipairs(nodeKeys) do rcall('DEL', key) end
    if ttl > 0 then
      local ttlS = string.format('%d', ttl)
      rcall('SET', packedKey, packed, 'PX', ttlS)
      for _, key in ipairs(otherKeys) do rcall('PEXPIRE', key, ttlS) end
    else
      rcall('SET', packedKey, packed)
    end
  else
    retainRun(runKey, evKey, nodeKeys, otherKeys, ttl, r[1] or '', false)
  end
end
if elsewhere ~= '' then rcall('ZADD', finKey, ended, elsewhere) end
rcall('ZREM', finKey, member)
return 1
