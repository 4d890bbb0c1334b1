-- cancel_run: cancel a run, for cancel.lua and for the submit of a run that
-- interrupts or rolls back its thread's active run (submit.lua), so the
-- cancel and the submit are one atomic step. A script includes it after
-- defining rcall and maxlen, and after lib/limits.lua.
--
-- cancelRun(c) sets the run's cancel flag; its BLOCKED, READY and WAITING nodes
-- become CANCELLED at once; when nodes are RUNNING it PUBLISHes the run on
-- c.channel so their owners stop (their heartbeat's cancel flag is the
-- fallback). A run already cancelled only pushes again while nodes run.
-- c: run (run hash), ev (its stream), ready (ready index), fin (finished
-- index), prefix (ref prefix "thread:run:"), id (run id), nodes (node
-- hashes) and ids (their ids, same order), reason, who, channel, now (ms).
-- c.lim, when set, maps each limit key of the run's READY nodes to its
-- {holders, waiters} keys (lib/limits.lua limitKeysFrom; the caller
-- includes limits): a READY node that ends here leaves its limits' queues
-- and the slot handed to it goes to the next waiter (leaveLimits). When a
-- READY node names a limit c.lim lacks, nothing changes: the answer is
-- "limits" and the keys needed ("k1,k2"), for the caller to ask again.
-- With c.limPartial set (submit.lua, which has written before it cancels)
-- a limit c.lim lacks is passed over instead, as without c.lim: a handed
-- slot stays until its reservation runs out.
-- Returns what it did ("cancelled", "already", or "missing": no run hash,
-- "finished": the run ended before), the run's status, how many nodes
-- are still RUNNING, and the waiters handed a slot ("ref|queue").
local function cancelRun(c)
  local r = rcall('HMGET', c.run, 'status', 'cancel', 'total', 'inc')
  if not r[1] then return 'missing', '', 0 end
  local function push(n)
    if n == 0 or c.channel == '' or not c.id then return end
    local msg = c.id
    if r[4] and r[4] ~= '' then msg = msg .. '~' .. r[4] end
    rcall('PUBLISH', c.channel, msg)
  end
  local running = 0
  if r[2] == '1' then
    for _, k in ipairs(c.nodes) do
      if rcall('HGET', k, 'state') == 'RUNNING' then running = running + 1 end
    end
    push(running)
    return 'already', r[1], running
  end
  if r[1] ~= 'RUNNING' and r[1] ~= 'QUEUED' then return 'finished', r[1], 0 end
  -- Each node's state, and a READY node's limits, read once up front: a
  -- missing limit key is found before anything changes.
  local st, lims, queues = {}, {}, {}
  local missing, seenMissing = {}, {}
  for i, k in ipairs(c.nodes) do
    local f = rcall('HMGET', k, 'state', 'limits', 'queue')
    st[i] = f[1]
    if c.lim and f[1] == 'READY' and f[2] and f[2] ~= '' then
      lims[i], queues[i] = limitList(f[2]), f[3]
      for _, l in ipairs(lims[i]) do
        if not c.lim[l[1]] and not seenMissing[l[1]] and not c.limPartial then
          seenMissing[l[1]] = true
          missing[#missing + 1] = l[1]
        end
      end
    end
  end
  if #missing > 0 then return 'limits', table.concat(missing, ','), 0 end
  local now = c.now
  local wakes = {}
  rcall('HSET', c.run, 'cancel', 1, 'cancel_reason', c.reason)
  rcall('XADD', c.ev, 'MAXLEN', '~', maxlen, '*', 'type', 'cancel_requested',
    'node', '', 'epoch', 0, 'worker', c.who, 'at', now, 'reason', c.reason)
  local ended, waited = 0, 0
  for i, k in ipairs(c.nodes) do
    local s = st[i]
    if s == 'WAITING' then waited = waited + 1 end
    if s == 'BLOCKED' or s == 'READY' or s == 'WAITING' then
      local id = c.ids[i]
      if lims[i] then leaveLimits(lims[i], c.lim, c.prefix .. id, queues[i], tonumber(now), wakes) end
      rcall('HSET', k, 'state', 'CANCELLED', 'error', 'run cancelled: ' .. c.reason, 'finished_at', now)
      rcall('ZREM', c.ready, c.prefix .. id)
      rcall('XADD', c.ev, 'MAXLEN', '~', maxlen, '*', 'type', 'cancelled',
        'node', id, 'epoch', 0, 'worker', c.who, 'at', now, 'reason', c.reason)
      ended = ended + 1
    elseif s == 'RUNNING' then
      running = running + 1
    end
  end
  if waited > 0 then rcall('HINCRBY', c.run, 'waiting', -waited) end
  local terminal = rcall('HINCRBY', c.run, 'terminal', ended)
  local status = r[1]
  if terminal >= tonumber(r[3]) then
    status = 'CANCELLED'
    rcall('HSET', c.run, 'status', status, 'finished_at', now)
    rcall('ZADD', c.fin, now, c.prefix)
    rcall('XADD', c.ev, 'MAXLEN', '~', maxlen, '*', 'type', 'run_finished',
      'node', '', 'epoch', 0, 'worker', c.who, 'at', now, 'status', status)
  end
  push(running)
  return 'cancelled', status, running, wakes
end
