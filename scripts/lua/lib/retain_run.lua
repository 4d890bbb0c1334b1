-- retain_run: what retention does to one finished run's keys, kept in one
-- place for retain.lua (the retention sweep) and commit.lua (which retains
-- a one-node run in the step that ends it). A script includes it after
-- defining rcall.
--
-- A SUCCEEDED run never changes again while its keys live: retry.lua
-- refuses it, and submit.lua answers its id with the stored run. Its hashes
-- keep only what a reader shows or a replayed write compares (state, epoch,
-- claim): the fields of a live node (lease, remaining dependencies) and
-- those at their default (no dependencies, no releases, no timeout) go,
-- about 300 B of a no-op node's 800. Readers take an absent field as its
-- default. Runs that can be retried keep every field.
--
-- Redis 7 preallocates 4 KiB for each new stream node and gives it back
-- only when the node fills up, so the stream of a short run takes about
-- 4.7 KiB, more than all its other keys together. A stream restored from
-- its own DUMP is stored at its size, and DUMP and RESTORE in one script
-- lose no event. Where DUMP or RESTORE is refused (a Redis-compatible
-- server without them), the stream just gets its time to live.

-- What a SUCCEEDED run's hashes no longer need: the *Always fields (a
-- live node's, and the ids the key names carry), and each of nodeNames
-- that holds its default (nodeDefaults, in the same order).
local runAlways = {'id', 'thread', 'failed', 'cancel'} -- both 0 in a SUCCEEDED run
local nodeAlways = {'id', 'run', 'thread', 'remaining', 'lease_until', 'heartbeat_at', 'end_op'}
local nodeNames = {'deps', 'dependents', 'descendants', 'timeout_ms', 'releases', 'retry', 'prev_owner'}
local nodeDefaults = {'[]', '[]', '[]', '0', '0', '', ''}

-- retainRun gives runKey, each of nodeKeys (the run's node hashes) and each
-- of otherKeys (its locator, when in this slot) the time to live ttl ms,
-- or none when ttl is -1 (kept forever); it slims a SUCCEEDED run's hashes
-- and stores evKey, the run's event stream, again at its size.
local function retainRun(runKey, evKey, nodeKeys, otherKeys, ttl)
  local r = rcall('HMGET', runKey, 'status', 'behind', 'multitask')
  if r[1] == 'SUCCEEDED' then
    local drop = {unpack(runAlways)}
    if r[2] == '' then drop[#drop + 1] = 'behind' end
    if r[3] == '' then drop[#drop + 1] = 'multitask' end
    rcall('HDEL', runKey, unpack(drop))
    for _, key in ipairs(nodeKeys) do
      local v = rcall('HMGET', key, unpack(nodeNames))
      drop = {unpack(nodeAlways)}
      for j, name in ipairs(nodeNames) do
        if v[j] == nodeDefaults[j] then drop[#drop + 1] = name end
      end
      rcall('HDEL', key, unpack(drop))
    end
  end
  if ttl > 0 then
    rcall('PEXPIRE', runKey, ttl)
    for _, key in ipairs(nodeKeys) do rcall('PEXPIRE', key, ttl) end
    for _, key in ipairs(otherKeys) do rcall('PEXPIRE', key, ttl) end
  end
  local dump = redis.pcall('DUMP', evKey)
  local compacted = false
  if type(dump) == 'string' then
    local ok = redis.pcall('RESTORE', evKey, math.max(ttl, 0), dump, 'REPLACE')
    compacted = type(ok) ~= 'table' or not ok.err
  end
  if not compacted and ttl > 0 then rcall('PEXPIRE', evKey, ttl) end
end
