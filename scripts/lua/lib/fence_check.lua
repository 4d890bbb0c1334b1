-- fence_check: the fence check every term-scoped write makes, kept in one
-- place. A script includes it after defining the locals it reads: rcall,
-- evKey, maxlen, nodeID, worker, epoch and claimID (the caller's), now.
--
-- rejectWriteAt appends stale_rejected for op (with any extra field
-- pairs) to the run's events under stream id id ('*': Redis's) and
-- returns code, for the script to return; rejectWrite with Redis's id.
local function rejectWriteAt(id, op, code, storedEpoch, ...)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, id, 'type', 'stale_rejected',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', now,
    'op', op, 'current_epoch', storedEpoch, ...)
  return code
end

local function rejectWrite(op, code, storedEpoch, ...)
  return rejectWriteAt('*', op, code, storedEpoch, ...)
end

-- staleCode compares the caller's epoch and claim id with the node's
-- stored ones. It returns nil when the caller holds the node's current
-- claim; else it records the refusal and returns -10 (the node was claimed
-- again since) or -11 (the same epoch under another claim id, as after a
-- failover lost a claim).
local function staleCode(storedEpoch, storedClaim, op, ...)
  if storedEpoch ~= epoch then return rejectWrite(op, -10, storedEpoch, ...) end
  if storedClaim ~= claimID then return rejectWrite(op, -11, storedEpoch, ...) end
  return nil
end
