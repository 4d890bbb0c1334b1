--[[ resume: answer a parked node's wait; the node is READY again.

Fenced by the wait it answers: the node must be WAITING under ARGV[2]'s
wait id, in a run not cancelled. The value is stored (field resume, as
JSON {"wait": wait_id, "value": v}) for the node's next attempt, which the
caller enqueues (wait ids are ids: [A-Za-z0-9._-]).
Every answer is also kept as field "answer:<wait id>" for the node's
lifetime (a retry clears the field resume, never these; retention packs
them with the node): a second resume of the same wait changes nothing and
returns the first answer, whatever came after it (the node parked again,
was retried, or the run ended). Mode "timeout" (the sweeper) answers a
wait whose timeout passed, as the park said: with its default value
({"value": v}), or with an error ({"error": msg}) that fails the next
attempt without running it.

KEYS[1] node hash
KEYS[2] run hash
KEYS[3] run event stream
KEYS[4] ready index (zset: ref -> ms when READY)
KEYS[5] waits index (zset: ref -> ms when the sweeper next looks at the
        wait: its timeout, or its thread state's keep-alive, wait_keep.lua)

ARGV[1] node id
ARGV[2] wait id the resume answers
ARGV[3] value: JSON text (mode resume)
ARGV[4] who resumes (recorded as the event's worker)
ARGV[5] ref of the node in the indexes
ARGV[6] event stream MAXLEN (approximate)
ARGV[7] mode: "resume" or "timeout"

Returns
  {1, queue, attempt}  resumed: READY; enqueue its attempt + 1
  {2, answer, state, queue, attempt}
                       this wait was answered already: the first answer
                       ({"wait": id, "value": v} or {"wait": id, "error":
                       msg}) and the node's state; queue and attempt
                       while that answer is the one its next attempt
                       reads ("" and 0 otherwise); nothing changed
  -1   node and run missing (the run may be packed: the caller reads it)
  {-1, "node"}  the run exists and has no such node
  -13  mode timeout: the wait has not timed out
  {-22, run_status, cancel}  the run is cancelled ("1") or finished
  -25  the node is not waiting (nothing parked it), or waits on
       another wait: its wait id is not ARGV[2]
]]
local rcall = redis.call
local nodeKey, runKey, evKey, readyKey, waitsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local nodeID, waitID, value, who, ref, maxlen, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]

local f = rcall('HMGET', nodeKey, 'state', 'wait_id', 'resumed_wait', 'resume', 'queue', 'attempt',
  'wait_timeout_at', 'wait_on_timeout', 'wait_default', 'answer:' .. waitID, 'wait_keep_at')
if not f[1] then
  if rcall('EXISTS', runKey) == 1 then return {-1, 'node'} end
  return -1
end
-- A repeat (a lost reply, or a second answer): the first answer, and the
-- node's state, so a caller whose first reply was lost still enqueues a
-- node that is READY with it (its task id makes a second enqueue a no-op).
-- resumed_wait alone: an answer stored before answers were kept.
local first = f[10]
if not first and f[3] == waitID then first = f[4] end
if first then
  if f[3] == waitID and f[4] then return {2, first, f[1], f[5] or '', tonumber(f[6]) or 0} end
  return {2, first, f[1], '', 0}
end
local r = rcall('HMGET', runKey, 'status', 'cancel')
if r[1] ~= 'RUNNING' or r[2] == '1' then
  if mode == 'timeout' then rcall('ZREM', waitsKey, ref) end
  return {-22, r[1] or '', r[2] or ''}
end
-- The sweeper's index entry: gone once the node is not waiting, else
-- scored by the earlier of its timeout and its keep-alive
-- (wait_keep.lua), so a stale entry costs one call, not one per sweep.
local function reindex()
  local due = tonumber(f[7] or f[11])
  if f[1] == 'WAITING' and f[7] and f[11] then due = math.min(tonumber(f[7]), tonumber(f[11])) end
  if f[1] ~= 'WAITING' or not due then
    rcall('ZREM', waitsKey, ref)
  else
    rcall('ZADD', waitsKey, string.format('%d', due), ref)
  end
end
if f[1] ~= 'WAITING' or f[2] ~= waitID then
  if mode == 'timeout' then reindex() end
  return -25
end
--@include clock

local answer
if mode == 'timeout' then
  if not f[7] or tonumber(f[7]) > now then
    reindex()
    return -13
  end
  if f[8] == 'resume' then
    answer = '{"wait":"' .. waitID .. '","value":' .. (f[9] or 'null') .. '}'
  else
    answer = cjson.encode({wait = waitID, error = 'wait ' .. waitID .. ' timed out'})
  end
else
  answer = '{"wait":"' .. waitID .. '","value":' .. value .. '}'
end
rcall('HSET', nodeKey, 'state', 'READY', 'ready_at', nowS, 'resume', answer, 'resumed_wait', waitID,
  'answer:' .. waitID, answer)
rcall('HINCRBY', runKey, 'waiting', -1)
rcall('ZADD', readyKey, nowS, ref)
rcall('ZREM', waitsKey, ref)
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'resumed',
  'node', nodeID, 'epoch', 0, 'worker', who, 'at', nowS, 'wait_id', waitID, 'mode', mode)
return {1, f[5], tonumber(f[6])}
