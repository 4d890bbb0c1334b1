-- packed_fence: the fence for a write to a node of a run packed into one
-- key (lib/pack.lua), shared by packed_fence.lua and checkpoint.lua. A
-- script includes it after lib/pack.lua, lib/unpack.lua and
-- lib/fence_check.lua (and the locals that one reads).

-- packedRefusal answers a write (op, by the caller: nodeID, worker, epoch,
-- claimID) to a node of the run packed under packedKey as the fence check
-- would from the node's stored epoch and claim. A refusal is recorded by
-- rejectWrite, with the fields in ..., in evKey: the run's stream, made
-- again after the packing, its first id after the packed events', with
-- the packed key's time to live. Returns 2 (a commit of the claim that
-- committed the node), -1 (no packed run or node), -10, -11 or -12 (see
-- packed_fence.lua).
local function packedRefusal(packedKey, op, ...)
  local _, nodes, lastMs, lastSeq = unpackRun(rcall('GET', packedKey), true)
  if not nodes then return -1 end
  local run = unpackRunFields(rcall('GET', packedKey))
  local node
  for i, id in ipairs(cjson.decode(run.nodes or '[]')) do
    if id == nodeID then node = nodes[i] end
  end
  if not node then return -1 end

  local code = -12
  if node.epoch ~= epoch then
    code = -10
  elseif node.claim ~= claimID then
    code = -11
  elseif op == 'commit' and node.state == 'SUCCEEDED' then
    return 2
  end
  if code == -12 and op ~= 'checkpoint' and op ~= 'checkpoint_writes' then return code end

  local fresh = rcall('EXISTS', evKey) == 0
  -- In the same ms as the last packed event, an id Redis would make for a
  -- new stream could come before it.
  local id = '*'
  if fresh and tonumber(now) <= lastMs then id = string.format('%d-%d', lastMs, lastSeq + 1) end
  rejectWriteAt(id, op, code, node.epoch or '0', ...)
  if fresh then
    local ttl = rcall('PTTL', packedKey)
    if ttl > 0 then rcall('PEXPIRE', evKey, ttl) end
  end
  return code
end
