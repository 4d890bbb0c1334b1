--[[ sweep: hand out index entries that are due, once per retry interval.

The indexes are triggers, never authority: the caller re-enqueues each
returned node and the claim script decides. Each returned entry's score is
pushed forward by retry_ms so that concurrent sweepers (every runner runs
one) do not re-enqueue the same node on every tick. Cost follows what is
due, not history.

KEYS[1] lease index (zset: ref -> lease_until ms)
KEYS[2] ready index (zset: ref -> ms when READY)

ARGV[1] grace after lease_until, ms: a lease is due when lease_until + grace < now
ARGV[2] ready threshold, ms: a READY node is due when ready_at + threshold < now
ARGV[3] at most this many refs of each kind
ARGV[4] retry interval for expired leases, ms (READY entries wait the
        threshold again: a backlog must not cost an enqueue per tick)

Returns
  {now_ms, {expired_ref...}, {stale_ready_ref...}}
]]
local rcall = redis.call
local leaseKey, readyKey = KEYS[1], KEYS[2]
local grace, threshold = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, retry = tonumber(ARGV[3]), tonumber(ARGV[4])

local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function due(key, lag, again)
  local refs = rcall('ZRANGEBYSCORE', key, '-inf', '(' .. (now - lag), 'LIMIT', 0, limit)
  for _, ref in ipairs(refs) do
    rcall('ZADD', key, 'XX', now - lag + again, ref)
  end
  return refs
end

return {now, due(leaseKey, grace, retry), due(readyKey, threshold, math.max(retry, threshold))}
