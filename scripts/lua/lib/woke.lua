-- woke: the waiters an operation handed a freed limit slot to, noted so
-- that a replay of the operation (its reply was lost, and with it the
-- list its caller enqueues) names them again: the waiter is woken once,
-- not left to the recheck of waiting nodes (30 s). lib/limits.lua
-- freeLimits notes them on the node's hash under the claim that ended,
-- cancel.lua on the run's hash under "-" (field woke, "ID ref|queue
-- ..."; ids, refs and queues hold no space). A script includes it after
-- defining rcall, in the branch that answers a replay.
--
-- wokeAgain(key, id) returns the waiters noted on hash key by id that
-- still hold the slot handed to them unclaimed (a reservation "r:..." in
-- a limit's holders hash among KEYS), or every one noted when KEYS hold no
-- holders hash; nil when none.
-- field names another field than "woke" (claim.lua notes a claim's own
-- under "claim_woke", so that it never replaces what an end noted).
local function wokeAgain(key, id, field)
  local raw = rcall('HGET', key, field or 'woke')
  if not raw or string.sub(raw, 1, #id + 1) ~= id .. ' ' then return nil end
  local holders = {}
  for _, k in ipairs(KEYS) do
    if string.sub(k, -2) == ':h' and string.find(k, '{lim/', 1, true) then holders[#holders + 1] = k end
  end
  local out = {}
  for w in string.gmatch(string.sub(raw, #id + 2), '[^ ]+') do
    local keep = #holders == 0
    local ref = string.match(w, '^([^|]*)|')
    for _, h in ipairs(holders) do
      local v = rcall('HGET', h, ref)
      if v and string.sub(v, 1, 2) == 'r:' then
        keep = true
        break
      end
    end
    if keep then out[#out + 1] = w end
  end
  if #out == 0 then return nil end
  return out
end
