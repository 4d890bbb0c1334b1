--[[ compact: give a finished run's event stream its time to live, stored at
its real size.

Redis 7 preallocates 4 KiB for each new stream node and gives it back only
when the node fills up, so the stream of a short run takes about 4.7 KiB,
more than all its other keys together. A stream restored from its own DUMP
is stored at its size. DUMP and RESTORE run in this one script, so no event
appended in between (a stale write's stale_rejected, a retry's) is lost.
Called by the retention sweep, never on a node's path. Where DUMP or
RESTORE is refused (a Redis-compatible server without them), the stream
just gets its time to live.

KEYS[1] run event stream

ARGV[1] time to live, ms; 0: none (runs kept forever)

Returns
  1  stored again at its size
  2  time to live set, not compacted (DUMP or RESTORE refused)
  0  no such stream
]]
local rcall = redis.call
local evKey = KEYS[1]
local ttl = tonumber(ARGV[1])

local dump = redis.pcall('DUMP', evKey)
if not dump then return 0 end
if type(dump) == 'string' then
  local ok = redis.pcall('RESTORE', evKey, ttl, dump, 'REPLACE')
  if type(ok) ~= 'table' or not ok.err then return 1 end
end
if ttl > 0 then rcall('PEXPIRE', evKey, ttl) end
return 2
