-- restore: a packed run (lib/pack.lua) written back as its keys, for
-- retry.lua, which re-runs a FAILED run the retention packed. A script
-- includes it after lib/pack.lua and lib/unpack.lua.

-- restoreRun writes the run packed in s back as the keys it was packed
-- from: the run hash runKey, the node hashes nodeKeys (in the run's node
-- order) and the event stream evKey, each entry under its own id, every
-- field and value as stored; entries evKey holds already (refusals
-- recorded after the packing, lib/packed_fence.lua) follow, under their
-- ids. The keys get no time to live. Returns false, changing nothing,
-- when s is not a packed run or holds another number of nodes.
local function restoreRun(s, runKey, nodeKeys, evKey)
  local run, nodes, _, _, events = unpackRun(s, true, true)
  if not run or #nodes ~= #nodeKeys then return false end
  local function flatten(t)
    local out = {}
    for k, v in pairs(t) do
      out[#out + 1] = k
      out[#out + 1] = v
    end
    return out
  end
  local later = rcall('XRANGE', evKey, '-', '+')
  rcall('DEL', evKey)
  for _, e in ipairs(events) do rcall('XADD', evKey, e[1], unpack(e[2])) end
  for _, e in ipairs(later) do rcall('XADD', evKey, e[1], unpack(e[2])) end
  rcall('PERSIST', evKey)
  rcall('HSET', runKey, unpack(flatten(run)))
  for i, key in ipairs(nodeKeys) do
    local f = flatten(nodes[i])
    if #f > 0 then rcall('HSET', key, unpack(f)) end
  end
  return true
end
