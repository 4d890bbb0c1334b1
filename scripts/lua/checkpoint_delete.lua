--[[ checkpoint_delete: delete a thread's checkpoints, or those one run wrote.

mode "thread": every checkpoint of the thread, in every namespace; refused
while the thread has an active run that has not finished.
mode "run": the checkpoints ARGV[2] wrote (the newest of each namespace,
back to the first written by another run), so the thread's state is what it
was before that run: a rollback. Versions are never reused.

KEYS[1]   the thread's active-run key
KEYS[2]   hash of the run ARGV[3] names (any key of the thread when none)
KEYS[3]   the thread's checkpoint hash (ns -> last version assigned)
KEYS[4..] per namespace of ARGV[4..], four keys: versions zset, data hash,
          ids hash, pending writes hash

ARGV[1]   mode: thread | run
ARGV[2]   run id (mode run)
ARGV[3]   the thread's active run id as the caller read it ("" if none)
ARGV[4..] every namespace of the thread, as the caller read them

Returns
  {1, deleted}  how many checkpoints were deleted
  {-21, active_run_id}  mode thread: the thread's active run has not finished
  -23  the active run or the namespaces changed since the caller read them:
       read again and retry
]]
local rcall = redis.call
local activeKey, activeRunKey, threadKey = KEYS[1], KEYS[2], KEYS[3]
local mode, runID, expectedActive = ARGV[1], ARGV[2], ARGV[3]

if (rcall('GET', activeKey) or '') ~= expectedActive then return -23 end
if rcall('HLEN', threadKey) ~= #ARGV - 3 then return -23 end
if mode == 'thread' and expectedActive ~= '' then
  local st = rcall('HGET', activeRunKey, 'status')
  if st == 'RUNNING' or st == 'PENDING' then return {-21, expectedActive} end
end

local deleted = 0
for i = 4, #ARGV do
  local k = 4 + (i - 4) * 4
  local versionsKey, dataKey, idsKey, writesKey = KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  if mode == 'thread' then
    deleted = deleted + rcall('ZCARD', versionsKey)
    rcall('DEL', versionsKey, dataKey, idsKey, writesKey)
  else
    for _, v in ipairs(rcall('ZREVRANGE', versionsKey, 0, -1)) do
      local rec = rcall('HGET', dataKey, v .. ':i')
      if not rec then break end
      rec = cjson.decode(rec)
      if rec.run ~= runID then break end
      if rcall('HGET', idsKey, rec.id) == v then rcall('HDEL', idsKey, rec.id) end
      local w = rcall('HGET', dataKey, v .. ':w')
      if w then
        for _, field in ipairs(cjson.decode(w)) do rcall('HDEL', writesKey, field) end
      end
      rcall('HDEL', dataKey, v .. ':d', v .. ':m', v .. ':i', v .. ':w')
      rcall('ZREM', versionsKey, v)
      deleted = deleted + 1
    end
  end
end
-- The thread's hash of counters stays, so a version is never reused.
return {1, deleted}
