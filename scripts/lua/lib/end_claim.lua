-- end_claim: the answers of the claims that ended the node's attempts by
-- fail, release or park, for those scripts to answer a retried call (its
-- reply was lost) as the first time, before the fence, whatever happened
-- to the node since. A script includes it after defining rcall.
--
-- Field end_claim holds up to 8 entries "op:claim|code|extra", newest
-- first, separated by ";" (claim ids hold no ":", "|" or ";"). A later
-- claim keeps it, so a retry is recognised after a takeover, a retry of
-- the run, or another claim's end.
--
-- endedAs(raw, op, claim) returns the code and extra the claim's op ended
-- the node with, or nil. endedWith(raw, op, claim, code, extra) returns the
-- field with that entry first.
local function endedAs(raw, op, claim)
  if not raw then return nil end
  local key = op .. ':' .. claim .. '|'
  local i = string.find(raw, key, 1, true)
  if not i then return nil end
  return string.match(raw, '^(%d)|([^;]*)', i + #key)
end

local function endedWith(raw, op, claim, code, extra)
  local out = {op .. ':' .. claim .. '|' .. code .. '|' .. (extra or '')}
  for e in string.gmatch(raw or '', '[^;]+') do
    if #out == 8 then break end
    out[#out + 1] = e
  end
  return table.concat(out, ';')
end
