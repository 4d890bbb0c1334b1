--[[ enqueue: put one task on an Asynq queue as Asynq's own client (v0.26)
would, so that Asynq's servers, Inspector and web UI see no difference: the
task hash (msg, state, and pending_since or the scheduled set's score) and
the task id on the queue's pending list or scheduled set, and the queue's
name in the set of queues. A task id that is there already is refused, as
Asynq refuses it (ErrTaskIDConflict); a call whose reply was lost and that
is sent again finds its own token on the task and answers as it did the
first time.

Time is Redis's: a task due at or before Redis's clock is pending, a later
one is scheduled at its due second.

KEYS[1] the task hash: asynq:{<queue>}:t:<id>
KEYS[2] the queue's pending list: asynq:{<queue>}:pending
KEYS[3] the queue's scheduled set: asynq:{<queue>}:scheduled
KEYS[4] the set of queue names, asynq:queues; absent once the caller has
        added this queue's name, and on a Redis Cluster, where the set
        lives in another slot and the caller adds the name itself

ARGV[1] the task id
ARGV[2] the task message (Asynq's TaskMessage, protobuf-encoded)
ARGV[3] when the task is due, Unix milliseconds; 0: now
ARGV[4] the queue name
ARGV[5] this call's token: unique per enqueue, the same when it is sent again

Returns
  1  enqueued (or enqueued by this same call before its reply was lost)
  0  a task of that id is there already: nothing changed
]]
local rcall = redis.call
local task, pending, scheduled = KEYS[1], KEYS[2], KEYS[3]
local id, msg, due, queue, token = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]

if rcall('EXISTS', task) == 1 then
  if rcall('HGET', task, 'baton_enqueue') == token then return 1 end
  return 0
end
if KEYS[4] then rcall('SADD', KEYS[4], queue) end
local now = rcall('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if due > nowMs then
  rcall('HSET', task, 'msg', msg, 'state', 'scheduled', 'baton_enqueue', token)
  rcall('ZADD', scheduled, math.floor(due / 1000), id)
else
  -- Unix nanoseconds, written as digits: a Lua number cannot hold them.
  local since = now[1] .. string.format('%06d', tonumber(now[2])) .. '000'
  rcall('HSET', task, 'msg', msg, 'state', 'pending', 'pending_since', since, 'baton_enqueue', token)
  rcall('LPUSH', pending, id)
end
return 1
