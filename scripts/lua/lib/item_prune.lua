-- item_prune: drop a store namespace's items whose time to live has
-- passed (at most 100 a call, so a script stays short), before a script
-- reads or writes the namespace. A script includes it after clock, with
-- itemsKey (the namespace's hash) and ttlKey (its zset: key -> ms the
-- item expires) defined.
local function pruneItems()
  local gone = rcall('ZRANGEBYSCORE', ttlKey, '-inf', nowS, 'LIMIT', 0, 100)
  if #gone > 0 then
    rcall('HDEL', itemsKey, unpack(gone))
    rcall('ZREM', ttlKey, unpack(gone))
  end
end
