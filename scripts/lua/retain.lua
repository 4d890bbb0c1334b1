--[[ retain: give one finished run's keys their time to live, store its
event stream at its real size, and take the run off its shard's finished
index. Called by the retention sweep, never on a node's path.

One script per run, not a command per key: a runner ending 2,000 runs a
second retains them all, and each command it saves is one the claims and
commits around it do not wait behind.

A run that is no longer in the finished index was retained already, or
re-opened by retry.lua since the caller read the index: nothing changes.

Redis 7 preallocates 4 KiB for each new stream node and gives it back only
when the node fills up, so the stream of a short run takes about 4.7 KiB,
more than all its other keys together. A stream restored from its own DUMP
is stored at its size, and DUMP and RESTORE in one script lose no event.
Where DUMP or RESTORE is refused (a Redis-compatible server without them),
the stream just gets its time to live.

A run of a thread has its locator in another slot, out of this script's
reach: the script puts the bare run id in the finished index in the run's
place, and the caller gives the locator its time to live, then takes the
id off. An id that a lost reply or a crash left behind is read with the
rest of the index by the next pass, so no locator outlives its run.

A SUCCEEDED run never changes again while its keys live: retry.lua
refuses it, and submit.lua answers its id with the stored run. Its hashes
keep only what a reader shows or a replayed write compares (state, epoch,
claim): the fields of a live node (lease, remaining dependencies) and
those at their default (no dependencies, no releases, no timeout) go,
about 300 B of a no-op node's 800. Readers take an absent field as its
default. Runs that can be retried keep every field.

KEYS[1]   finished index (zset: "thread:run:" -> ms when the run ended;
          a bare "run": its locator still wants its time to live)
KEYS[2]   run hash
KEYS[3]   run event stream
KEYS[4..] the run's node hashes (ARGV[4] of them), then its locator when
          it is in this slot

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

-- What a SUCCEEDED run's hashes no longer need: the *Always fields (a
-- live node's, and the ids the key names carry), and each of nodeNames
-- that holds its default (nodeDefaults, in the same order).
local runAlways = {'id', 'thread', 'failed', 'cancel'} -- both 0 in a SUCCEEDED run
local nodeAlways = {'id', 'run', 'thread', 'remaining', 'lease_until', 'heartbeat_at', 'end_op'}
local nodeNames = {'deps', 'dependents', 'descendants', 'timeout_ms', 'releases', 'retry', 'prev_owner'}
local nodeDefaults = {'[]', '[]', '[]', '0', '0', '', ''}

local ended = rcall('ZSCORE', finKey, member)
if not ended then return 0 end
if ttl == 0 then
  rcall('DEL', runKey, evKey)
  for i = 4, #KEYS do rcall('DEL', KEYS[i]) end
else
  local r = rcall('HMGET', runKey, 'status', 'behind', 'multitask')
  if r[1] == 'SUCCEEDED' then
    local drop = {unpack(runAlways)}
    if r[2] == '' then drop[#drop + 1] = 'behind' end
    if r[3] == '' then drop[#drop + 1] = 'multitask' end
    rcall('HDEL', runKey, unpack(drop))
    for i = 4, 3 + nodes do
      local v = rcall('HMGET', KEYS[i], unpack(nodeNames))
      drop = {unpack(nodeAlways)}
      for j, name in ipairs(nodeNames) do
        if v[j] == nodeDefaults[j] then drop[#drop + 1] = name end
      end
      rcall('HDEL', KEYS[i], unpack(drop))
    end
  end
  if ttl > 0 then
    rcall('PEXPIRE', runKey, ttl)
    for i = 4, #KEYS do rcall('PEXPIRE', KEYS[i], ttl) end
  end
  local dump = redis.pcall('DUMP', evKey)
  local compacted = false
  if type(dump) == 'string' then
    local ok = redis.pcall('RESTORE', evKey, math.max(ttl, 0), dump, 'REPLACE')
    compacted = type(ok) ~= 'table' or not ok.err
  end
  if not compacted and ttl > 0 then rcall('PEXPIRE', evKey, ttl) end
end
if elsewhere ~= '' then rcall('ZADD', finKey, ended, elsewhere) end
rcall('ZREM', finKey, member)
return 1
