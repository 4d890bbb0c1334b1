--[[ agent_thread_delete: delete an Agent Server API thread's record.

The caller deleted the thread's checkpoints first (checkpoint_delete.lua,
refused while a run is active), so a record never outlives a delete that
answered. A tombstone remembers the op for ten minutes: a retry after a
lost reply answers "deleted" as the first call did.

KEYS[1] the record (hash)
KEYS[2] the shard's index of records (zset)
KEYS[3] the record's tombstone (string: the op id of the delete)

ARGV[1] thread id
ARGV[2] op id (a retry passes the same)

Returns
  1    deleted (or the retry of the op that deleted it)
  -1   no such record; nothing changed
]]
local rcall = redis.call
local rec, index, tomb = KEYS[1], KEYS[2], KEYS[3]
local thread, op = ARGV[1], ARGV[2]

if rcall('DEL', rec) == 0 then
  if rcall('GET', tomb) == op then return 1 end
  return -1
end
rcall('ZREM', index, thread)
rcall('SET', tomb, op, 'PX', 600000)
return 1
