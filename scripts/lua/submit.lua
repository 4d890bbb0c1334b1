--[[ submit: create a run and all its nodes in one atomic step.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   the thread's active-run key
KEYS[5]   hash of the run ARGV[7] names (any key of the thread when none)
KEYS[6..] node hashes, one per node, in the order of ARGV[5]'s array

ARGV[1] run id
ARGV[2] thread id
ARGV[3] spec digest (idempotency: same id + same digest = same run)
ARGV[4] ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[5] nodes, JSON array of {id, kind, queue, input, deps, dependents,
        descendants, max_attempts, timeout_ms}; input is a JSON text kept
        verbatim as a string
ARGV[6] event stream MAXLEN (approximate)
ARGV[7] the thread's active run id as the caller read it ("" if none)
ARGV[8] multitask strategy: "" (the run is its own thread) or "reject"
ARGV[9] incarnation: a new id for this submission, made by the caller, so
        that a run id reused after retention never continues the epochs
        (and fencing tokens) of the run that held it before

Returns
  {1, status, incarnation, ready_id...}
                            created; ready_id are the nodes with no deps, now READY
  {2, status, incarnation, ready_id...}
                            the run already exists with the same digest (a
                            retry): no change; incarnation is the stored one,
                            ready_id the nodes still READY, to enqueue again
  -20                       the run exists with a different digest
  {-21, active_run_id}      reject: the thread's active run has not finished
  -23                       the thread's active run changed since the caller
                            read it: read again and retry
]]
local rcall = redis.call
local runKey, evKey, readyKey = KEYS[1], KEYS[2], KEYS[3]
local runID, thread, digest, refPrefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local nodes = cjson.decode(ARGV[5])
local maxlen = ARGV[6]
local activeKey, activeRunKey, expectedActive, multitask = KEYS[4], KEYS[5], ARGV[7], ARGV[8]
local inc = ARGV[9]

-- Redis's cjson encodes an empty table as {} (an object) and decodes null as
-- a userdata; lists are stored as JSON arrays whatever the input.
local function list(v)
  if type(v) ~= 'table' or #v == 0 then return '[]' end
  return cjson.encode(v)
end

local existing = rcall('HGET', runKey, 'digest')
if existing then
  if existing == digest then
    local r = rcall('HMGET', runKey, 'status', 'inc')
    local out = {2, r[1], r[2] or ''}
    for i, n in ipairs(nodes) do
      if rcall('HGET', KEYS[5 + i], 'state') == 'READY' then out[#out + 1] = n.id end
    end
    return out
  end
  return -20
end

if multitask ~= '' then
  local cur = rcall('GET', activeKey) or ''
  if cur ~= expectedActive then return -23 end
  if cur ~= '' then
    local st = rcall('HGET', activeRunKey, 'status')
    if st == 'RUNNING' or st == 'PENDING' then return {-21, cur} end
  end
  rcall('SET', activeKey, runID)
end

local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local ids = {}
local ready = {}
for i, n in ipairs(nodes) do
  ids[i] = n.id
  local deps = n.deps
  if type(deps) ~= 'table' then deps = {} end
  local state = 'BLOCKED'
  if #deps == 0 then
    state = 'READY'
    ready[#ready + 1] = n.id
    rcall('ZADD', readyKey, now, refPrefix .. n.id)
  end
  rcall('HSET', KEYS[5 + i],
    'id', n.id, 'run', runID, 'thread', thread, 'state', state,
    'kind', n.kind, 'queue', n.queue, 'input', n.input,
    'deps', list(deps), 'dependents', list(n.dependents),
    'descendants', list(n.descendants), 'remaining', #deps,
    'max_attempts', n.max_attempts, 'timeout_ms', n.timeout_ms,
    'attempt', 0, 'releases', 0, 'epoch', 0, 'claim', '', 'owner', '',
    'lease_until', 0, 'ready_at', now, 'progress', 0, 'inc', inc,
    'created_at', now, 'updated_at', now)
end

rcall('HSET', runKey, 'id', runID, 'thread', thread, 'digest', digest, 'inc', inc,
  'status', 'RUNNING', 'nodes', cjson.encode(ids), 'total', #nodes,
  'terminal', 0, 'failed', 0, 'cancel', 0, 'created_at', now, 'updated_at', now)
rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'submitted',
  'node', '', 'epoch', 0, 'worker', '', 'at', now, 'nodes', #nodes)

local out = {1, 'RUNNING', inc}
for _, id in ipairs(ready) do out[#out + 1] = id end
return out
