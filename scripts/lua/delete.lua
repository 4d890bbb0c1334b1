--[[ delete: remove an ended run's keys, at once, in one step.

Only a run that has ended (SUCCEEDED, FAILED or CANCELLED) is deleted: a
run still QUEUED, RUNNING or holding a node is refused with its status, and
nothing changes; cancel it first. Its hashes, its event stream, its entry in
the run listing and in the finished index go together, so no reader finds
half a run. Checkpoints belong to the thread, not the run, and stay.

A run of a thread has its locator in another slot, out of this script's
reach: the script puts the bare run id in the finished index in the run's
place (as retain.lua does), and the caller deletes the locator, then takes
the id off; should the caller not get that far, the retention sweep gives
the locator its time to live.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   run listing index (zset: run id -> ms when created)
KEYS[4]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[5]   the run's packed key: a finished run packed into one string
          (lib/pack.lua) in place of its hashes and stream
KEYS[6..] the run's node hashes (ARGV[3] of them), then, for a run
          without a thread, its locator (in this slot), then any other
          key of the run to delete with it (its chunk stream and that
          stream's state, stream_append.lua)

ARGV[1] run id
ARGV[2] the run's member of the finished index ("thread:run:")
ARGV[3] how many node hashes follow KEYS[5]
ARGV[4] "1" when the run's locator is in another slot (a run of a thread)

Returns
  {1, status}    deleted; status is the one it ended with
  -1             no such run
  {-30, status}  the run has not ended: nothing changed
]]
local rcall = redis.call
local runKey, evKey, runsKey, finKey, packedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local run, member, elsewhere = ARGV[1], ARGV[2], ARGV[4] == '1'
--@include pack
--@include unpack

local status = rcall('HGET', runKey, 'status')
if not status then
  local packed = unpackRunFields(rcall('GET', packedKey))
  status = packed and packed.status
end
if not status then return -1 end
if status ~= 'SUCCEEDED' and status ~= 'FAILED' and status ~= 'CANCELLED' then
  return {-30, status}
end
for i = 1, #KEYS do
  if i ~= 3 and i ~= 4 then rcall('DEL', KEYS[i]) end
end
rcall('ZREM', runsKey, run)
local ended = rcall('ZSCORE', finKey, member)
rcall('ZREM', finKey, member)
if elsewhere then rcall('ZADD', finKey, ended or '0', run) end
return {1, status}
