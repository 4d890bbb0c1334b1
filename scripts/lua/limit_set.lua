--[[ limit_set: set or delete a limit and bring every key it governs in
line with it at once, on a single server (fence/limits.go SetLimit,
DeleteLimit; docs/flow-control.md).

Each limit key keeps the concurrency its frees hand slots on by (field
"~c" of its holders hash, lib/limits.lua). This script stores the
definition and, in the same step, writes each governed key's "~c" from
the definitions now stored: a later free hands on by the new limit, never
by the old. A raised limit (or one deleted, or left without concurrency)
hands its free slots to the first waiters at once, for the caller to
enqueue; a lowered one takes no slot away.

The caller passes the keys seen under the name (the index of keys seen,
read first). A key claimed for the first time since (the index names it
now) is answered -31 with every key the index names under the name, and
nothing changes: the caller calls again with them.

KEYS[1] limit definitions hash
KEYS[2] index of limit keys seen (zset: key -> ms of its last claim)
KEYS[3..] per governed key, its holders hash and waiters zset

ARGV[1] limit name ("openai", or a prefix rule "tenant:*")
ARGV[2] the definition, "concurrency,rate,period_ms,burst"; "" deletes

Returns
  {1, existed, {woken...}}  stored; existed is 1 when the name was set
         before; woken lists "ref|queue" of waiters handed a slot
  {-31, "k1,k2,..."}  a governed key was not passed: nothing changed
]]
local rcall = redis.call
local defsKey, seenKey = KEYS[1], KEYS[2]
local name, def = ARGV[1], ARGV[2]
--@include clock
--@include limits

-- A key the name governs: the name itself, or a key under its prefix.
local rule = string.match(name, '^(.*)%*$')
local function governs(key)
  if key == name then return true end
  return rule ~= nil and string.sub(key, 1, #rule) == rule
end

local passed, order = {}, {}
for i = 3, #KEYS, 2 do
  local k = string.match(KEYS[i], '{lim/(.*)}:h$')
  if not k or KEYS[i + 1] ~= string.sub(KEYS[i], 1, -2) .. 'w' then
    return redis.error_reply('limit_set: KEYS[' .. i .. '] is not a holders hash followed by its waiters')
  end
  passed[k] = {h = KEYS[i], w = KEYS[i + 1]}
  order[#order + 1] = k
end
local missing = {}
for _, k in ipairs(rcall('ZRANGE', seenKey, 0, -1)) do
  if governs(k) and not passed[k] then missing[#missing + 1] = k end
end
if #missing > 0 then
  local all = {}
  for _, k in ipairs(rcall('ZRANGE', seenKey, 0, -1)) do
    if governs(k) then all[#all + 1] = k end
  end
  return {-31, table.concat(all, ',')}
end

local existed = rcall('HEXISTS', defsKey, name)
if def == '' then
  rcall('HDEL', defsKey, name)
else
  rcall('HSET', defsKey, name, def)
end
local wakes = {}
for _, k in ipairs(order) do
  local p = passed[k]
  local c = limitDef(defsKey, k) or 0
  if c > 0 then
    rcall('HSET', p.h, '~c', c)
    handOn(p.h, p.w, c - purgeHolders(p.h, now), now, wakes, '')
  else
    -- No concurrency governs the key now: nobody waits for a slot.
    if rcall('HEXISTS', p.h, '~c') == 1 then rcall('HSET', p.h, '~c', 0) end
    handOn(p.h, p.w, rcall('ZCARD', p.w), now, wakes, '')
  end
end
return {1, existed, wakes}
