-- held: a limit key's holders on a Redis Cluster (limit_take.lua,
-- limit_free.lua, limit_extend.lua, limit_use.lua), where a node's keys
-- and a limit's live in different slots and no script touches both. A
-- script includes it after defining rcall and now (lib/clock.lua).
--
-- There a holder is "claim@DEADLINE": the claim id that holds the slot
-- for the node ref (the field) and until when, in ms on the clock of the
-- limit's own master (TIME in these scripts; no other clock is ever
-- compared with it). A slot handed to a woken waiter is "r:DEADLINE|QUEUE"
-- as on a single server (lib/limits.lua handOn). Field "~c" holds the
-- concurrency now set (limit_conc.lua writes it when the limit changes,
-- each take as it read it), and is no slot.

--
-- A take that moved a holder to its claim (a takeover, or a slot handed
-- to the node as a woken waiter) keeps what it moved after ">":
-- "claim@DEADLINE>MOVED", until the claim's first extension. A give-back
-- of a claim that did not happen puts MOVED back (limit_free.lua), so a
-- refused takeover never deletes the live owner's holder.

-- heldBy splits a holder: the claim id (or "r:" for a reservation) and
-- its deadline; nil for nothing.
local function heldBy(v)
  if not v then return nil end
  local d = string.match(v, '^r:(%d+)|')
  if d then return 'r:', tonumber(d) end
  local c, dl = string.match(v, '^([^@>]*)@(%d+)')
  if c then return c, tonumber(dl) end
  return v, 0 -- not written by these scripts: treated as run out
end

-- movedFrom is the holder a take moved to this one (see above), or nil.
local function movedFrom(v)
  if not v or string.sub(v, 1, 2) == 'r:' then return nil end
  local m = string.match(v, '^[^@>]*@%d+>(.+)$')
  return m
end

-- purgeHeld drops the holders whose deadline passed and returns how many
-- slots are held now.
local function purgeHeld(hKey)
  local all = rcall('HGETALL', hKey)
  local n = 0
  for i = 1, #all, 2 do
    if all[i] ~= '~c' then
      local _, dl = heldBy(all[i + 1])
      if dl < now then rcall('HDEL', hKey, all[i]) else n = n + 1 end
    end
  end
  return n
end
