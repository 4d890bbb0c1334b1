--[[ agent_asst_put: create an Agent Server API assistant, at version 1.

An assistant is a hash (its current fields, as JSON texts), a hash of its
versions (N -> the version's fields as one JSON object, "N:at" -> ms) and
an entry in its shard's index, all in the assistant id's slot. A record
that exists is left as it is: if_exists "raise" refuses, "do_nothing"
answers it (the runner's default assistants are made this way). The op id
makes a retry after a lost reply answer as the first call did.

KEYS[1] the assistant (hash)
KEYS[2] its versions (hash)
KEYS[3] the shard's index of assistants (zset: id -> created_at ms)

ARGV[1] assistant id
ARGV[2] op id (a retry passes the same)
ARGV[3] if_exists: "raise" or "do_nothing"
ARGV[4] version 1 (a JSON object)
ARGV[5..] field, value, field, value, ... (graph_id, name, config, ...)

Returns
  {1, field, value, ...}   created (or the retry of the op that created it)
  {0, field, value, ...}   it existed, if_exists do_nothing: as stored
  -70                      it existed and if_exists is raise; nothing changed
]]
local rcall = redis.call
--@include clock
local rec, versions, index = KEYS[1], KEYS[2], KEYS[3]
local id, op, ifExists, v1 = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if rcall('EXISTS', rec) == 1 then
  if rcall('HGET', rec, 'op') == op then
    return {1, unpack(rcall('HGETALL', rec))}
  end
  if ifExists == 'raise' then return -70 end
  return {0, unpack(rcall('HGETALL', rec))}
end
for i = 5, #ARGV, 2 do
  rcall('HSET', rec, ARGV[i], ARGV[i + 1])
end
rcall('HSET', rec, 'created_at', nowS, 'updated_at', nowS, 'version', '1', 'max', '1', 'rev', '1', 'op', op)
rcall('DEL', versions)
rcall('HSET', versions, '1', v1, '1:at', nowS)
rcall('ZADD', index, nowS, id)
return {1, unpack(rcall('HGETALL', rec))}
