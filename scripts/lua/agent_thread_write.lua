--[[ agent_thread_write: change an Agent Server API thread's record.

The caller read the record, computed its new fields (merged metadata, the
state a state update left) and passes them with the revision it read: the
write is refused when the record changed since (another writer came
first), so no merge is lost; the caller reads again and retries. The op id
makes a retry after a lost reply answer as the first call did.

KEYS[1] the record (hash)

ARGV[1] op id (a retry passes the same)
ARGV[2] the record's rev as the caller read it
ARGV[3..] field, value, field, value, ... to set

Returns
  {1, field, value, ...}   written (or the retry of the op that wrote it)
  -1                       no such record; nothing changed
  -71                      the record changed since the caller read it
]]
local rcall = redis.call
--@include clock
local rec, op, rev = KEYS[1], ARGV[1], ARGV[2]

local cur = rcall('HMGET', rec, 'rev', 'op')
if not cur[1] then return -1 end
if cur[2] == op then return {1, unpack(rcall('HGETALL', rec))} end
if cur[1] ~= rev then return -71 end
for i = 3, #ARGV, 2 do
  rcall('HSET', rec, ARGV[i], ARGV[i + 1])
end
rcall('HSET', rec, 'updated_at', nowS, 'op', op)
rcall('HINCRBY', rec, 'rev', 1)
return {1, unpack(rcall('HGETALL', rec))}
