--[[ agent_asst_write: change an Agent Server API assistant.

A patch adds a version (the highest + 1) and makes it current; a "latest"
makes an existing version current again. The caller read the assistant,
computed its new fields (merged metadata, or the chosen version's) and
passes them with the revision it read: the write is refused when the
assistant changed since, so no merge is lost; the caller reads again and
retries. The op id makes a retry after a lost reply answer as the first
call did.

KEYS[1] the assistant (hash)
KEYS[2] its versions (hash)

ARGV[1] op id (a retry passes the same)
ARGV[2] the assistant's rev as the caller read it
ARGV[3] "new" to add a version, else the number of the version to make
        current
ARGV[4] the new version (a JSON object) with "new", else ""
ARGV[5..] field, value, field, value, ... to set

Returns
  {1, field, value, ...}   written (or the retry of the op that wrote it)
  -1                       no such assistant; nothing changed
  -71                      the assistant changed since the caller read it
  -72                      no such version; nothing changed
]]
local rcall = redis.call
--@include clock
local rec, versions = KEYS[1], KEYS[2]
local op, rev, which, snap = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local cur = rcall('HMGET', rec, 'rev', 'op', 'max')
if not cur[1] then return -1 end
if cur[2] == op then return {1, unpack(rcall('HGETALL', rec))} end
if cur[1] ~= rev then return -71 end
local version
if which == 'new' then
  version = string.format('%d', (tonumber(cur[3]) or 0) + 1)
  rcall('HSET', versions, version, snap, version .. ':at', nowS)
  rcall('HSET', rec, 'max', version)
else
  if rcall('HEXISTS', versions, which) == 0 then return -72 end
  version = which
end
for i = 5, #ARGV, 2 do
  rcall('HSET', rec, ARGV[i], ARGV[i + 1])
end
rcall('HSET', rec, 'version', version, 'updated_at', nowS, 'op', op)
rcall('HINCRBY', rec, 'rev', 1)
return {1, unpack(rcall('HGETALL', rec))}
