--[[ heartbeat: extend the caller's lease and store its progress.

A heartbeat proves the owner is alive; it never moves a node towards
SUCCEEDED. It is accepted only while the node is RUNNING under the caller's
epoch and claim id; a mismatch is recorded as stale_rejected.

KEYS[1] node hash
KEYS[2] run hash
KEYS[3] run event stream
KEYS[4] lease index (zset: ref -> lease_until ms)

ARGV[1] node id
ARGV[2] worker id
ARGV[3] epoch the caller claimed under
ARGV[4] claim id the caller claimed under
ARGV[5] lease ttl, ms (lease_until = Redis now + ttl)
ARGV[6] progress 0-100, or "" to keep the stored one
ARGV[7] ref of the node in the indexes
ARGV[8] event stream MAXLEN (approximate)

Returns
  {1, lease_until_ms, cancel}  renewed; cancel is 1 when the run was cancelled
  -1   node missing
  -10  stale epoch: the node was claimed again since
  -11  not owner: same epoch, another claim id
  -12  the caller's claim is no longer RUNNING (released or finished)
]]
local rcall = redis.call
local nodeKey, runKey, evKey, leaseKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local nodeID, worker, epoch, claimID = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local ttl, progress, ref, maxlen = tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8]

local f = rcall('HMGET', nodeKey, 'state', 'epoch', 'claim', 'progress')
if not f[1] then return -1 end
--@include clock
--@include fence_check
local stale = staleCode(f[2], f[3], 'heartbeat')
if stale then return stale end
if f[1] ~= 'RUNNING' then return -12 end

local leaseUntil = now + ttl
local leaseS = int(leaseUntil)
rcall('HSET', nodeKey, 'lease_until', leaseS, 'heartbeat_at', nowS)
rcall('ZADD', leaseKey, leaseS, ref)
-- A node stores no progress until it reports some (submit.lua): absent is 0.
if progress ~= '' and progress ~= (f[4] or '0') then
  rcall('HSET', nodeKey, 'progress', progress)
  rcall('XADD', evKey, 'MAXLEN', '~', maxlen, '*', 'type', 'progress',
    'node', nodeID, 'epoch', epoch, 'worker', worker, 'at', nowS, 'progress', progress)
end
local cancel = 0
if rcall('HGET', runKey, 'cancel') == '1' then cancel = 1 end
return {1, leaseUntil, cancel}
