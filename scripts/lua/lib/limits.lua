-- limits: concurrency slots and rate tokens of fleet-wide limits
-- (fence/limits.go, docs/flow-control.md), for claim.lua, which takes
-- them, and commit, fail, release and park, which free the slots of the
-- claim they end. A script includes it after defining rcall.
--
-- A node's field "limits" lists its limit keys and costs, "k1=c1,k2=~c2":
-- a cost written "~c" was named in the spec ({"name", "cost"}), and is
-- metered: a cost the attempt reports (Task.Spend, "::spend N") replaces
-- it when the attempt ends (chargeSpend).
-- Per key a caller passes, in that order, the holders hash (ref -> the
-- claim id holding a slot, or "r:DEADLINE|QUEUE" for a slot handed to a
-- woken waiter), the waiters zset ("ref|queue" -> ms it began to wait)
-- and, to claim.lua only, the GCRA state (TAT, ms). The key names are
-- checked against the node's list ("{lim/KEY}:h" ...), so a caller that
-- passed none, or others, is told so before anything changes.
--
-- A slot is freed only by the claim that holds it: a stale owner's late
-- end finds another claim id there and frees nothing. A freed slot goes
-- to the first waiter at once (a reservation it has limitHoldMS to use),
-- returned for the caller to enqueue: no waiter polls. Field "~c" of a
-- holders hash is the concurrency the key's frees hand on by: the
-- definition now stored (limit_set.lua writes it with the definition,
-- claims as they read it), never an older one.
local limitHoldMS = 10000  -- a woken waiter's time to claim its slot
local limitRecheckMS = 30000 -- a waiting node is looked at again after this (lost wakes)

local function limitList(raw)
  local out = {}
  for k, m, c in string.gmatch(raw or '', '([^,=]+)=(~?)(%d+)') do out[#out + 1] = {k, tonumber(c), m == '~'} end
  return out
end

-- limitKeysOK reports whether KEYS[first..] are the node's limit keys,
-- per entries per key (2 or 3), followed by tail keys (0 when nil).
local function limitKeysOK(list, first, per, tail)
  local sfx = {':h', ':w', ':t'}
  if #KEYS ~= first - 1 + per * #list + (tail or 0) then return false end
  for i, l in ipairs(list) do
    for j = 1, per do
      local want = '{lim/' .. l[1] .. '}' .. sfx[j]
      local k = KEYS[first + (i - 1) * per + j - 1]
      if string.sub(k, -#want) ~= want then return false end
    end
  end
  return true
end

-- handOn gives free slots of a key to its first waiters, up to free of
-- them, skipping self; appends "ref|queue" of each woken to wakes. It
-- returns how many slots it gave.
local function handOn(hKey, wKey, free, now, wakes, self)
  if free <= 0 then return 0 end
  local given = 0
  local heads = rcall('ZRANGE', wKey, 0, free)
  for _, m in ipairs(heads) do
    if given >= free then break end
    local ref, queue = string.match(m, '^([^|]*)|(.*)$')
    if ref and ref ~= self then
      rcall('HSET', hKey, ref, 'r:' .. string.format('%d', now + limitHoldMS) .. '|' .. queue)
      rcall('ZREM', wKey, m)
      wakes[#wakes + 1] = m
      given = given + 1
    end
  end
  return given
end

-- purgeHolders drops reservations whose deadline passed; returns the
-- slots held (field "~c" holds the limit, and is no slot).
local function purgeHolders(hKey, now)
  local all = rcall('HGETALL', hKey)
  local n = #all / 2
  for i = 1, #all, 2 do
    if all[i] == '~c' then n = n - 1 end
    local d = string.match(all[i + 1], '^r:(%d+)|')
    if d and tonumber(d) < now then
      rcall('HDEL', hKey, all[i])
      n = n - 1
    end
  end
  return n
end

-- claimsHeld counts the slots of hKey held by claims, not by slots
-- handed to woken waiters ("r:...").
local function claimsHeld(hKey)
  local all = rcall('HGETALL', hKey)
  local n = 0
  for i = 1, #all, 2 do
    if all[i] ~= '~c' and string.sub(all[i + 1], 1, 2) ~= 'r:' then n = n + 1 end
  end
  return n
end

-- waitFirst puts self back at the head of the waiters wKey: a woken
-- waiter whose handed slot a lowered limit took back keeps its turn.
local function waitFirst(wKey, self, now)
  local head = rcall('ZRANGE', wKey, 0, 0, 'WITHSCORES')
  local score = now
  if head[2] then score = math.min(tonumber(head[2]), now) - 0.001 end
  rcall('ZADD', wKey, string.format('%.3f', score), self)
end

-- keepHanded keeps, for a node that waits under the key at position pos
-- of order, the slots handed to it under the keys before it (a
-- reservation "r:DEADLINE|QUEUE"): their deadline moves to past the
-- sweeper's next recheck of the waiting node, whose claim keeps them
-- again. Without it a node naming two busy limits lost the first one's
-- slot while it waited for the second, and the second's while it waited
-- again for the first, for as long as both stayed busy. A node that
-- dies or is cancelled leaves them (leaveLimits, or the deadline).
local function keepHanded(plan, order, pos, ref, now)
  for p = 1, pos - 1 do
    local pl = plan[order[p]]
    if pl.c > 0 then
      local q = string.match(rcall('HGET', pl.h, ref) or '', '^r:%d+|(.*)$')
      if q then
        rcall('HSET', pl.h, ref, 'r:' .. string.format('%d', now + limitRecheckMS + limitHoldMS) .. '|' .. q)
      end
    end
  end
end

-- endLimitTail is how many keys follow the holders and waiters pairs of
-- the scripts that end a claim: with a reported spend (ARGV), the
-- definitions hash and each limit's rate state, 1 + #list; else none.
local function endLimitTail(list, spend)
  if spend then return 1 + #list end
  return 0
end

-- freeLimits frees the slots claim holds under the node's limits, whose
-- keys end KEYS (2 per limit, then the tail of endLimitTail), and hands
-- them on. It returns the woken waiters ("ref|queue"), the node's limit
-- list and the index of its first limit key, or nil when the node has no
-- limits or no limit keys were passed (the last key is not a limit's: no
-- call made). The woken are noted on the node under claim (field woke,
-- lib/woke.lua), for a replay of this end to name them again.
local function freeLimits(nodeKey, ref, claim, now, spend)
  local last = KEYS[#KEYS]
  local sfx = string.sub(last, -2)
  if (sfx ~= ':w' and sfx ~= ':t') or not string.find(last, '{lim/', 1, true) then return nil end
  local list = limitList(rcall('HGET', nodeKey, 'limits'))
  local tail = endLimitTail(list, spend)
  local first = #KEYS - tail - 2 * #list + 1
  if #list == 0 or not limitKeysOK(list, first, 2, tail) then return nil end
  local wakes = {}
  for i = 1, #list do
    local hKey, wKey = KEYS[first + 2 * (i - 1)], KEYS[first + 2 * (i - 1) + 1]
    local h = rcall('HMGET', hKey, ref, '~c')
    if h[1] == claim then
      rcall('HDEL', hKey, ref)
      -- "~c" is the limit as now stored (limit_set.lua writes it with
      -- the definition): a lowered limit hands on nothing until enough
      -- slots are back.
      local held = rcall('HLEN', hKey) - 1
      handOn(hKey, wKey, (tonumber(h[2]) or 0) - held, now, wakes, ref)
    end
  end
  if #wakes > 0 then rcall('HSET', nodeKey, 'woke', claim .. ' ' .. table.concat(wakes, ' ')) end
  return wakes, list, first
end

-- limitDef returns concurrency, rate, period ms and burst of key from the
-- definitions hash: the key's own, else the longest prefix rule "NS:*"
-- covering it; nil when none governs it (deleted since the submit).
local function limitDef(defsKey, key)
  local cands = {key}
  for i = #key, 1, -1 do
    if string.sub(key, i, i) == ':' then cands[#cands + 1] = string.sub(key, 1, i) .. '*' end
  end
  local v = rcall('HMGET', defsKey, unpack(cands))
  for i = 1, #cands do
    if v[i] then
      local c, r, p, b = string.match(v[i], '^(%d+),(%d+),(%d+),(%d+)$')
      if c then return tonumber(c), tonumber(r), tonumber(p), tonumber(b) end
    end
  end
  return nil
end

-- acquireLimits takes, for claim, a slot of every concurrency limit and
-- the node's cost from every rate of the node's limits, all or none.
-- KEYS[first] is the definitions hash, KEYS[first+1] the index of keys
-- seen, then 3 keys per limit. It returns:
--   'ok', wakes            taken (wakes: waiters woken on the way)
--   'rate', key, due_ms    a rate is spent: nothing taken, due then
--   'wait', key, wakes     no free slot under key: the node joined its
--                          waiters (first come, first served)
local function acquireLimits(list, first, ref, queue, claim, now)
  local defsKey, seenKey = KEYS[first], KEYS[first + 1]
  local wakes = {}
  local plan = {}
  local due, dueKey = 0, nil
  for i, l in ipairs(list) do
    local b = first + 2 + (i - 1) * 3
    local c, r, p, burst = limitDef(defsKey, l[1])
    plan[i] = {h = KEYS[b], w = KEYS[b + 1], t = KEYS[b + 2], c = c or 0, r = r or 0}
    if r and r > 0 then
      -- GCRA on Redis's clock: each unit of cost moves the theoretical
      -- arrival time (TAT) on by period/rate; a claim is allowed while
      -- TAT - now <= burst * period/rate.
      local T = p / r
      local tat = math.max(tonumber(rcall('GET', KEYS[b + 2])) or 0, now)
      local at = tat - burst * T
      if at > now and at > due then due, dueKey = at, l[1] end
      plan[i].tat = tat + l[2] * T
    end
  end
  if dueKey then return 'rate', dueKey, math.ceil(due) end
  -- Slots are looked at in key order, the same for every node (a
  -- cluster's takes go in that order too): a node that waits under one
  -- key keeps a slot handed to it under an earlier key (keepHanded), and
  -- no two nodes can each keep what the other waits for.
  local order = {}
  for i = 1, #list do order[i] = i end
  table.sort(order, function(a, b) return list[a][1] < list[b][1] end)
  for pos, i in ipairs(order) do
    local l, pl = list[i], plan[i]
    if pl.c == 0 then
      -- No concurrency governs the key now (deleted, or a rate only): a
      -- holder of the node's last claim (a takeover) still moves to this
      -- claim, whose end frees it; a handed slot is no longer needed.
      local mine = rcall('HGET', pl.h, ref)
      if mine and string.sub(mine, 1, 2) == 'r:' then
        rcall('HDEL', pl.h, ref)
      elseif mine then
        pl.move = true
      end
    end
    if pl.c > 0 then
      rcall('HSET', pl.h, '~c', pl.c)
      local mine = rcall('HGET', pl.h, ref)
      if mine and string.sub(mine, 1, 2) == 'r:' and claimsHeld(pl.h) >= pl.c then
        -- A slot handed on before the limit was lowered: the claims
        -- running fill the limit now stored, so the slot is taken back
        -- and the node waits again at the head of the queue.
        rcall('HDEL', pl.h, ref)
        waitFirst(pl.w, ref .. '|' .. queue, now)
        keepHanded(plan, order, pos, ref, now)
        return 'wait', l[1], wakes
      end
      if not mine then
        local free = pl.c - purgeHolders(pl.h, now)
        local self = ref .. '|' .. queue
        local rank = rcall('ZRANK', pl.w, self)
        local ahead = rank or rcall('ZCARD', pl.w)
        if ahead >= free then
          -- Whoever is ahead gets the free slots; this node waits.
          handOn(pl.h, pl.w, free, now, wakes, ref)
          if not rank then
            -- First come, first served, also within one millisecond: a
            -- tie would order waiters by name.
            local last = rcall('ZRANGE', pl.w, -1, -1, 'WITHSCORES')
            local score = now
            if last[2] and tonumber(last[2]) >= now then score = tonumber(last[2]) + 0.001 end
            rcall('ZADD', pl.w, string.format('%.3f', score), self)
          end
          keepHanded(plan, order, pos, ref, now)
          return 'wait', l[1], wakes
        end
        pl.take = ahead
      end
    end
  end
  for i, l in ipairs(list) do
    local pl = plan[i]
    if pl.take then handOn(pl.h, pl.w, pl.take, now, wakes, ref) end
    if pl.c > 0 or pl.move then
      rcall('HSET', pl.h, ref, claim)
      rcall('ZREM', pl.w, ref .. '|' .. (queue or ''))
    end
    if pl.tat then rcall('SET', pl.t, string.format('%.3f', pl.tat), 'PX', math.ceil(pl.tat - now) + 1000) end
    rcall('ZADD', seenKey, now, l[1])
  end
  return 'ok', wakes
end

-- spendArg reads a reported spend (ARGV): a whole number from 0 to 2^40,
-- or nil for none ("") and for anything else (the caller validated it;
-- a bad one changes nothing).
local function spendArg(v)
  if v == nil or v == '' or not string.match(v, '^%d+$') then return nil end
  local n = tonumber(v)
  if not n or n > 1099511627776 then return nil end
  return n
end

-- chargeRate moves the GCRA state tKey by delta units of cost of T ms
-- each (a refund when below zero), never below idle (a full bucket).
local function chargeRate(tKey, delta, T, now)
  local tat = math.max(tonumber(rcall('GET', tKey)) or 0, now) + delta * T
  if tat <= now then
    rcall('DEL', tKey)
  else
    rcall('SET', tKey, string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1000)
  end
end

-- chargeSpend charges the difference between the cost the attempt
-- reported (spend) and the cost its claim took, to (or refunds it from)
-- the rate of every metered limit of list ("~c": named with a cost), on
-- Redis's clock. KEYS[first + 2 * #list] is the definitions hash, then
-- one rate state per limit, in list order (checked here). A refund
-- never takes the rate below idle (a full bucket). Only the end of the
-- claim that took the cost calls it (after the fence, before nothing
-- else could end that claim), so a stale owner's or a replayed end
-- charges nothing. It returns the limits charged, "key=delta,...".
local function chargeSpend(list, first, spend, now)
  local defs = first + 2 * #list
  if not KEYS[defs] or string.sub(KEYS[defs], -7) ~= ':limits' then return '' end
  local out = {}
  for i, l in ipairs(list) do
    local tKey = KEYS[defs + i]
    local want = '{lim/' .. l[1] .. '}:t'
    if l[3] and tKey and string.sub(tKey, -#want) == want then
      local _, r, p = limitDef(KEYS[defs], l[1])
      local delta = spend - l[2]
      if r and r > 0 and delta ~= 0 then
        chargeRate(tKey, delta, p / r, now)
        out[#out + 1] = l[1] .. '=' .. string.format('%d', delta)
      end
    end
  end
  return table.concat(out, ',')
end

-- leaveLimits takes a node that ends while READY (a cancel) out of its
-- limits' queues: its entry among each key's waiters goes, and a slot
-- handed to it (a reservation "r:...", not yet claimed) is freed and
-- handed on to the next waiter at once, so a cancelled waiter keeps no
-- slot. lim maps a limit key to its {holders, waiters} keys; list is the
-- node's limits. Woken waiters are appended to wakes.
local function leaveLimits(list, lim, ref, queue, now, wakes)
  for _, l in ipairs(list) do
    local k = lim[l[1]]
    if k then -- a key not passed is left as it is (its hold runs out)
      rcall('ZREM', k.w, ref .. '|' .. (queue or ''))
      local h = rcall('HMGET', k.h, ref, '~c')
      if h[1] and string.sub(h[1], 1, 2) == 'r:' then
        rcall('HDEL', k.h, ref)
        handOn(k.h, k.w, (tonumber(h[2]) or 0) - purgeHolders(k.h, now), now, wakes, ref)
      end
    end
  end
end

-- limitKeysFrom reads the limit keys a caller passed as KEYS[first..],
-- pairs of holders hash and waiters zset ("...{lim/KEY}:h", ":w"), into
-- a map KEY -> {h, w}; nil when a key is not such a pair.
local function limitKeysFrom(first)
  local lim = {}
  for i = first, #KEYS, 2 do
    local name = string.match(KEYS[i], '{lim/(.*)}:h$')
    local w = KEYS[i + 1]
    if not name or not w or w ~= string.sub(KEYS[i], 1, -2) .. 'w' then return nil end
    lim[name] = {h = KEYS[i], w = w}
  end
  return lim
end
