-- rollback: remove what one run wrote to a thread's checkpoints, for
-- promote.lua. A script includes it after defining rcall.
--
-- rollbackNS(ns, run) takes one namespace's keys (ns = {versions, data,
-- ids, writes}) and removes, newest first, every checkpoint the run saved
-- (with its id and its pending writes), back to the first saved by
-- another run, and the pending writes the run stored against earlier
-- checkpoints (lib/anchor.lua's "anchor_w"). The namespace's latest
-- checkpoint is then the one from before the run's first write there.
-- Versions are never reused: the thread's counters stay. Returns how many
-- checkpoints it removed.
local function rollbackNS(ns, run)
  local versionsKey, dataKey, idsKey, writesKey = ns[1], ns[2], ns[3], ns[4]
  local removed = 0
  for _, v in ipairs(rcall('ZREVRANGE', versionsKey, 0, -1)) do
    local rec = rcall('HGET', dataKey, v .. ':i')
    if not rec then break end
    rec = cjson.decode(rec)
    if rec.run ~= run then break end
    if rcall('HGET', idsKey, rec.id) == v then rcall('HDEL', idsKey, rec.id) end
    local w = rcall('HGET', dataKey, v .. ':w')
    if w then
      for _, field in ipairs(cjson.decode(w)) do rcall('HDEL', writesKey, field) end
    end
    rcall('HDEL', dataKey, v .. ':d', v .. ':m', v .. ':i', v .. ':w')
    rcall('ZREM', versionsKey, v)
    removed = removed + 1
  end
  local a = rcall('HGET', dataKey, 'anchor')
  if a and string.match(a, '^(.*)|%d+$') == run then
    -- The run's writes against earlier checkpoints, and their place in
    -- those checkpoints' lists of fields.
    local gone, byVersion = {}, {}
    for _, field in ipairs(cjson.decode(rcall('HGET', dataKey, 'anchor_w') or '[]')) do
      rcall('HDEL', writesKey, field)
      gone[field] = true
      byVersion[string.match(field, '^(%d+)|')] = true
    end
    for v in pairs(byVersion) do
      local list = rcall('HGET', dataKey, v .. ':w')
      if list then
        local kept = {}
        for _, field in ipairs(cjson.decode(list)) do
          if not gone[field] then kept[#kept + 1] = field end
        end
        if #kept == 0 then
          rcall('HDEL', dataKey, v .. ':w')
        else
          rcall('HSET', dataKey, v .. ':w', cjson.encode(kept))
        end
      end
    end
    rcall('HDEL', dataKey, 'anchor', 'anchor_w')
  end
  return removed
end
