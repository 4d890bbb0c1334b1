-- anchor: the checkpoint a run's rollback goes back to, for checkpoint.lua
-- and checkpoint_writes.lua. A script includes it after defining rcall.
--
-- A namespace's data hash keeps, beside the versions' fields, the anchor
-- of the run that wrote last: field "anchor" = "<run>|<version>", the
-- newest version from before that run's first write in the namespace ("0":
-- none), and field "anchor_w" = JSON array of the pending-write fields the
-- run stored against checkpoints it did not write. Trimming spares the
-- anchor's version (checkpoint.lua), and a rollback (lib/rollback.lua)
-- removes what the anchor's run wrote back to it, so a rollback restores
-- the state from before the run whatever the history cap.
--
-- anchorOf(dataKey, versionsKey, run) returns the run's anchor version
-- (text), setting it at the run's first write to the namespace; an earlier
-- run's anchor can no longer be rolled back to and is replaced.
local function anchorOf(dataKey, versionsKey, run)
  local a = rcall('HGET', dataKey, 'anchor')
  if a then
    local r, v = string.match(a, '^(.*)|(%d+)$')
    if r == run then return v end
  end
  local top = rcall('ZREVRANGE', versionsKey, 0, 0)
  local v = top[1] or '0'
  rcall('HSET', dataKey, 'anchor', run .. '|' .. v)
  rcall('HDEL', dataKey, 'anchor_w')
  return v
end
