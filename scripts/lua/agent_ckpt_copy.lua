--[[ agent_ckpt_copy: copy one checkpoint namespace into a new thread.

The Agent Server API's thread copy (POST /threads/{id}/copy): the caller
read the source namespace in one transaction (it lives in the source
thread's slot) and passes it here, for the copy's slot. The copy gets the
same versions, data, ids and pending writes; not the source's rollback
anchor, which belongs to a run of the source. Only a namespace the copy
does not have yet is written: a retry after a lost reply finds its own
copy (the same last version) and answers as the first call did.

KEYS[1] the copy's checkpoint hash (ns -> last version assigned)
KEYS[2] the namespace's versions zset
KEYS[3] the namespace's data hash
KEYS[4] the namespace's ids hash
KEYS[5] the namespace's pending writes hash

ARGV[1] namespace
ARGV[2] the source's last version assigned in the namespace
ARGV[3] thread retention, ms, counted from now; 0 keeps them
ARGV[4] versions: JSON array of member, score, member, score, ...
ARGV[5] data: JSON array of field, value, ... (anchor fields left out)
ARGV[6] ids: JSON array of checkpoint id, version, ...
ARGV[7] pending writes: JSON array of field, value, ...

Returns
  1     copied
  2     copied already (a retry): nothing changed
  -70   the copy has other checkpoints in the namespace; nothing changed
]]
local rcall = redis.call
local ns, last, retention = ARGV[1], ARGV[2], tonumber(ARGV[3])

local cur = rcall('HGET', KEYS[1], ns)
if cur then
  if cur == last then return 2 end
  return -70
end
if rcall('EXISTS', KEYS[2]) == 1 then return -70 end

local function pairs_of(json, each)
  local list = cjson.decode(json)
  for i = 1, #list, 2 do each(list[i], list[i + 1]) end
end
pairs_of(ARGV[4], function(member, score) rcall('ZADD', KEYS[2], score, member) end)
pairs_of(ARGV[5], function(f, v) rcall('HSET', KEYS[3], f, v) end)
pairs_of(ARGV[6], function(f, v) rcall('HSET', KEYS[4], f, v) end)
pairs_of(ARGV[7], function(f, v) rcall('HSET', KEYS[5], f, v) end)
rcall('HSET', KEYS[1], ns, last)
if retention > 0 then
  for i = 1, 5 do rcall('PEXPIRE', KEYS[i], retention) end
end
return 1
