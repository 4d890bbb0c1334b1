--[[ stream_append: append a batch of an attempt's stream chunks (LangGraph's
values, updates, messages, custom, ...) to its run's stream.

Accepted only from the current claim (epoch and claim id) of a RUNNING
node of the same run incarnation; anything else appends nothing, records
stale_rejected with op=stream in the run's events, and returns the fencing
code: a paused worker's tokens never reach a reader.

The run's chunks have a stream of their own (KEYS[3]), beside its events
(KEYS[2]): readers of chunks never skip baton's node events, and a flood of
tokens never trims them. Each entry has the fields event (the stream mode),
data (JSON text, one line), node and attempt.

The first batch of a claim is preceded by one entry of event "metadata"
with data {"run_id": ..., "attempt": ...}: where an attempt starts. A
takeover re-runs the super-step the lost attempt was in, so a reader can
see its start twice; the metadata entry tells it to drop a partial message.

Batches of a claim are numbered by the caller: seq is the number of the
batch's first chunk, and the next batch starts at seq + its count or later.
The claim's last batch is remembered in KEYS[4] (claim id ->
"next|seq|id,id,..."), so a retry of it (its reply was lost) answers with
the ids it got the first time, before the fence, and appends nothing. An
older seq is refused (-17): that batch is either stored or lost for good.

The stream is bounded to the entries ARGV[9] says (approximate MAXLEN:
Redis trims whole macro nodes, so up to about 100 more are kept), and
each chunk to the bytes ARGV[10] says. The first batch of a claim removes
any time to live from the chunk stream and its state (a retried run's
keys may have had one); retention gives them the run's (retain.lua) and
delete.lua deletes them.

KEYS[1] node hash
KEYS[2] run event stream
KEYS[3] the run's chunk stream
KEYS[4] the run's chunk state hash (claim id -> its last batch)
KEYS[5] the run's packed key: a write to a node of a run packed into one
        key (retain.lua) is refused, and recorded, as the fence would

ARGV[1]  node id
ARGV[2]  run id
ARGV[3]  worker id
ARGV[4]  epoch the caller claimed under
ARGV[5]  claim id the caller claimed under
ARGV[6]  the run incarnation the caller claimed under, or "" (a lease
         from before incarnations)
ARGV[7]  the attempt the caller claimed (for the metadata entry)
ARGV[8]  seq: the claim's number of the batch's first chunk, from 0
ARGV[9]  chunk stream MAXLEN (approximate)
ARGV[10] size cap of one chunk's event and data, bytes
ARGV[11] event stream MAXLEN (approximate)
ARGV[12..] the chunks, two arguments each: event, data

Returns
  {1, id...}  appended; one stream id per chunk, in order
  {2, id...}  this claim had appended this batch already (a retry): the
              ids it got then; nothing appended
  -1   node missing
  -10  stale epoch: the node was claimed again since (or the run id was
       submitted again: another incarnation)
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING
  {-15, index, bytes}  chunk index (from 1) is over the cap: nothing
       appended
  {-17, next}  seq is below the claim's next one and is not its last
       batch again: nothing appended
]]
local rcall = redis.call
local nodeKey, evKey, chunkKey, stateKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local nodeID, runID, worker, epoch, claimID = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local inc, attempt, seq = ARGV[6], ARGV[7], tonumber(ARGV[8])
local chunkMax, cap, maxlen = ARGV[9], tonumber(ARGV[10]), ARGV[11]
local first = 12
local n = (#ARGV - first + 1) / 2

-- A retry of the claim's last batch answers as the first time, before the
-- fence: the node may have been taken over since.
local state = rcall('HGET', stateKey, claimID)
local nextSeq = 0
if state then
  local nx, last, ids = string.match(state, '^(%d+)|(%d+)|(.*)$')
  nextSeq = tonumber(nx)
  if tonumber(last) == seq and nextSeq - seq == n then
    local out = {2}
    for id in string.gmatch(ids, '[^,]+') do out[#out + 1] = id end
    return out
  end
end

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim', 'inc')
if not f[1] and not KEYS[5] then return -1 end
--@include clock
--@include fence_check
if not f[1] then -- packed, or gone
--@include pack
--@include unpack
--@include packed_fence
  return packedRefusal(KEYS[5], 'stream')
end
-- A lease of another submission of this run id is stale whatever its
-- epoch: the new run's epochs start at 1 again.
if inc ~= '' and f[4] and f[4] ~= inc then return rejectWrite('stream', -10, f[2]) end
local stale = staleCode(f[2], f[3], 'stream')
if stale then return stale end
if f[1] ~= 'RUNNING' then return rejectWrite('stream', -12, f[2]) end
if seq < nextSeq then return {-17, nextSeq} end
for i = 1, n do
  local size = #ARGV[first + 2 * i - 2] + #ARGV[first + 2 * i - 1]
  if size > cap then return {-15, i, size} end
end

if not state then
  rcall('PERSIST', chunkKey)
  rcall('PERSIST', stateKey)
  rcall('XADD', chunkKey, 'MAXLEN', '~', chunkMax, '*', 'event', 'metadata',
    'data', cjson.encode({run_id = runID, attempt = tonumber(attempt)}), 'node', nodeID, 'attempt', attempt)
end
local out, ids = {1}, {}
for i = 1, n do
  local id = rcall('XADD', chunkKey, 'MAXLEN', '~', chunkMax, '*', 'event', ARGV[first + 2 * i - 2],
    'data', ARGV[first + 2 * i - 1], 'node', nodeID, 'attempt', attempt)
  out[#out + 1] = id
  ids[#ids + 1] = id
end
rcall('HSET', stateKey, claimID, int(seq + n) .. '|' .. int(seq) .. '|' .. table.concat(ids, ','))
return out
