--[[ wait_keep: keep a parked node's thread state alive while it waits.

A thread's checkpoints expire a retention after their last write
(checkpoint.lua). A node that parks writes nothing while it waits, which
may be longer than that; its next attempt must find the state it parked
with. So while the node is WAITING, its thread's checkpoint hash and
every namespace's keys get the retention again from now, and the node's
entry in the waits index is scored for the next look: the earlier of its
wait's timeout and half a retention from now (field wait_keep_at). A
node no longer WAITING needs neither: its entry goes once no timeout is
left on it (resume.lua answers a timeout), and the state keeps the time
to live it has, so a cancelled wait leaves nothing without an expiry.
Called after each park and by the sweeper for an entry that came due;
any number of times, by any number of callers.

KEYS[1]   node hash
KEYS[2]   waits index (zset: ref -> ms when the sweeper next looks at it)
KEYS[3]   the thread's checkpoint hash (ns -> last version assigned)
KEYS[4..] per namespace of ARGV[4..], four keys: versions zset, data hash,
          ids hash, pending writes hash

ARGV[1]   ref of the node in the index
ARGV[2]   thread retention, ms ("0": checkpoints never expire)
ARGV[3]   N, how many namespaces the caller read
ARGV[4..] the thread's namespaces, as the caller read them

Returns
  {1, next_ms}  kept: the entry is due again at next_ms (0: it is gone,
                as nothing expires and the wait has no timeout)
  0             the node is not waiting (or is gone): nothing kept
  -23           the thread's namespaces changed since the caller read
                them: read again
]]
local rcall = redis.call
local nodeKey, waitsKey, threadKey = KEYS[1], KEYS[2], KEYS[3]
local ref, retention, nns = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])

local f = rcall('HMGET', nodeKey, 'state', 'wait_timeout_at')
if f[1] ~= 'WAITING' then
  if not f[2] or not f[1] then rcall('ZREM', waitsKey, ref) end
  return 0
end
if rcall('HLEN', threadKey) ~= nns then return -23 end
--@include clock

if retention > 0 then
  for i = 3, #KEYS do
    if rcall('PTTL', KEYS[i]) > 0 then rcall('PEXPIRE', KEYS[i], retention) end
  end
end
local due = now + math.max(math.floor(retention / 2), 1)
if f[2] and (retention <= 0 or tonumber(f[2]) < due) then
  due = tonumber(f[2])
elseif retention <= 0 then
  -- Nothing expires: only a timeout needs a look.
  rcall('ZREM', waitsKey, ref)
  return {1, 0}
end
local dueS = int(due)
rcall('HSET', nodeKey, 'wait_keep_at', dueS)
rcall('ZADD', waitsKey, dueS, ref)
return {1, due}
