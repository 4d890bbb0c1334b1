--[[ agent_ckpt_keep_latest: keep only the newest checkpoint of each namespace.

The Agent Server API's prune with strategy "keep_latest": a thread keeps
its state, not its history. In each namespace every checkpoint but the
newest goes, with the pending writes stored against it, the checkpoint
ids that named it and the namespace's rollback anchor. Refused while the
thread's active run is RUNNING (a run without a thread is the active run
of the thread of its id while the active-run key is absent), as
checkpoint_delete.lua is. Versions are never reused. A retry finds one
checkpoint per namespace and removes nothing more.

KEYS[1]   the thread's active-run key
KEYS[2]   hash of the run ARGV[1] names; when ARGV[1] is "", the hash of
          the run whose id is the thread
KEYS[3]   the thread's checkpoint hash (ns -> last version assigned)
KEYS[4..] per namespace of ARGV[3..], four keys: versions zset, data hash,
          ids hash, pending writes hash

ARGV[1]   the thread's active run id as the caller read it ("" if none)
ARGV[2]   thread id
ARGV[3..] every namespace of the thread, as the caller read them

Returns
  {1, removed}          how many checkpoints were removed
  {-21, active_run_id}  the thread's active run has not finished
  -23  the active run or the namespaces changed since the caller read them:
       read again and retry
]]
local rcall = redis.call
local activeKey, activeRunKey, threadKey = KEYS[1], KEYS[2], KEYS[3]
local expectedActive, thread = ARGV[1], ARGV[2]
local firstNS = 3

if (rcall('GET', activeKey) or '') ~= expectedActive then return -23 end
if rcall('HLEN', threadKey) ~= #ARGV - firstNS + 1 then return -23 end
if rcall('HGET', activeRunKey, 'status') == 'RUNNING' then
  local active = expectedActive
  if active == '' then active = thread end
  return {-21, active}
end

local removed = 0
for i = firstNS, #ARGV do
  local k = 4 + (i - firstNS) * 4
  local versionsKey, dataKey, idsKey, writesKey = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local older = rcall('ZREVRANGE', versionsKey, 1, -1)
  if #older > 0 then
    local gone = {}
    for _, v in ipairs(older) do
      gone[v] = true
      rcall('ZREM', versionsKey, v)
      rcall('HDEL', dataKey, v .. ':d', v .. ':m', v .. ':i', v .. ':w')
    end
    local ids = rcall('HGETALL', idsKey)
    for j = 1, #ids, 2 do
      if gone[ids[j + 1]] then rcall('HDEL', idsKey, ids[j]) end
    end
    for _, f in ipairs(rcall('HKEYS', writesKey)) do
      local v = string.match(f, '^(%d+)|')
      if v and gone[v] then rcall('HDEL', writesKey, f) end
    end
    rcall('HDEL', dataKey, 'anchor', 'anchor_w')
    removed = removed + #older
  end
end
return {1, removed}
