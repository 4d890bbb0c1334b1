--[[ agent_asst_delete: delete an Agent Server API assistant and its versions.

A tombstone remembers the op for ten minutes: a retry after a lost reply
answers "deleted" as the first call did.

KEYS[1] the assistant (hash)
KEYS[2] its versions (hash)
KEYS[3] the shard's index of assistants (zset)
KEYS[4] the assistant's tombstone (string: the op id of the delete)

ARGV[1] assistant id
ARGV[2] op id (a retry passes the same)

Returns
  1    deleted (or the retry of the op that deleted it)
  -1   no such assistant; nothing changed
]]
local rcall = redis.call
local rec, versions, index, tomb = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, op = ARGV[1], ARGV[2]

if rcall('DEL', rec) == 0 then
  if rcall('GET', tomb) == op then return 1 end
  return -1
end
rcall('DEL', versions)
rcall('ZREM', index, id)
rcall('SET', tomb, op, 'PX', 600000)
return 1
