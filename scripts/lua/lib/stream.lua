-- stream: keeping a run's event stream at its size, in one place for
-- submit.lua, which compacts the stream it creates, and lib/retain_run.lua.
-- A script includes it after defining rcall.
--
-- Redis 7 preallocates 4 KiB for each new stream node and gives the rest
-- back only when the node fills up: the stream of a run just submitted
-- takes about 4.4 KiB of memory, ten times what its one event needs, and
-- keeps it while the run waits and runs. A stream restored from its own
-- DUMP is stored at its size, later entries grow it by what they need,
-- and DUMP and RESTORE in one script lose no event. Where DUMP or RESTORE
-- is refused (a Redis-compatible server without them), a stream stays as
-- it is.

-- compactStream stores evKey again from its DUMP, with the time to live
-- ttl ms (0: none), and says whether it could.
local function compactStream(evKey, ttl)
  local dump = redis.pcall('DUMP', evKey)
  if type(dump) ~= 'string' then return false end
  local ok = redis.pcall('RESTORE', evKey, ttl, dump, 'REPLACE')
  return type(ok) ~= 'table' or not ok.err
end

-- streamPreallocated says whether evKey may hold a stream node's
-- preallocation (MEMORY USAGE counts what is allocated, 4 KiB for a node
-- alone): a stream compacted when it was created and never grown past one
-- node does not. When MEMORY USAGE is refused, it may.
local function streamPreallocated(evKey)
  local used = redis.pcall('MEMORY', 'USAGE', evKey)
  return type(used) ~= 'number' or used >= 4096
end
