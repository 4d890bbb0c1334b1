--[[ agent_thread_put: create an Agent Server API thread's record.

The record (created_at, updated_at, metadata, ...) is a hash in the
thread's slot, beside baton's own keys of the thread; the shard's index
lists every record by creation time, for search. A record that exists is
left as it is: if_exists "raise" refuses, "do_nothing" answers it. The op
id makes a retry after a lost reply answer as the first call did.

KEYS[1] the record (hash)
KEYS[2] the shard's index of records (zset: thread -> created_at ms)

ARGV[1] thread id
ARGV[2] metadata (a JSON object, as text)
ARGV[3] if_exists: "raise" or "do_nothing"
ARGV[4] op id (a retry passes the same)

Returns
  {1, field, value, ...}   created (or the retry of the op that created it)
  {0, field, value, ...}   it existed, if_exists do_nothing: as stored
  -70                      it existed and if_exists is raise; nothing changed
]]
local rcall = redis.call
--@include clock
local rec, index = KEYS[1], KEYS[2]
local thread, meta, ifExists, op = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if rcall('EXISTS', rec) == 1 then
  if rcall('HGET', rec, 'op') == op then
    return {1, unpack(rcall('HGETALL', rec))}
  end
  if ifExists == 'raise' then return -70 end
  return {0, unpack(rcall('HGETALL', rec))}
end
rcall('HSET', rec, 'created_at', nowS, 'updated_at', nowS, 'metadata', meta, 'rev', '1', 'op', op)
rcall('ZADD', index, nowS, thread)
return {1, unpack(rcall('HGETALL', rec))}
