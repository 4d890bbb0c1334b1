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

A run of a thread has its locator in another slot, out of this script's
reach: the script puts the bare run id in the finished index in the run's
place, and the caller gives the locator its time to live, then takes the
id off. An id that a lost reply or a crash left behind is read with the
rest of the index by the next pass, so no locator outlives its run.

KEYS[1]   finished index (zset: "thread:run:" -> ms when the run ended;
          a bare "run": its locator still wants its time to live)
KEYS[2]   run hash
KEYS[3]   run event stream
KEYS[4..] the run's node hashes (ARGV[4] of them), then, for a run
          without a thread, its locator (only runs stored before such
          runs stopped having one have it)

ARGV[1] time to live, ms; 0: delete now; -1: keep forever
ARGV[2] the run's member of the finished index ("thread:run:")
ARGV[3] the run id when its locator is in another slot and needs the time
        to live; empty otherwise
ARGV[4] how many node hashes follow KEYS[3]

Returns
  1  retained
  0  not in the finished index: nothing changed
]]
local rcall = redis.call
local finKey, runKey, evKey = KEYS[1], KEYS[2], KEYS[3]
local ttl, member, elsewhere = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local nodes = tonumber(ARGV[4]) or 0

--@include stream
--@include retain_run

local ended = rcall('ZSCORE', finKey, member)
if not ended then return 0 end
if ttl == 0 then
  rcall('DEL', runKey, evKey)
  for i = 4, #KEYS do rcall('DEL', KEYS[i]) end
else
  local nodeKeys, otherKeys = {}, {}
  local r = rcall('HMGET', runKey, 'status', 'id')
  for i = 4, #KEYS do
    if i <= 3 + nodes then
      nodeKeys[#nodeKeys + 1] = KEYS[i]
    elseif r[2] then -- a run without a thread has a locator only if stored with its id
      otherKeys[#otherKeys + 1] = KEYS[i]
    end
  end
  retainRun(runKey, evKey, nodeKeys, otherKeys, ttl, r[1] or '', false)
end
if elsewhere ~= '' then rcall('ZADD', finKey, ended, elsewhere) end
rcall('ZREM', finKey, member)
return 1
