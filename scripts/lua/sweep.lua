--[[ sweep: hand out index entries that are due, once per retry interval.

The indexes are triggers, never authority: the caller re-enqueues each
returned node and the claim script decides. Each returned entry's score is
pushed forward by retry_ms so that concurrent sweepers (every runner runs
one) do not re-enqueue the same node on every tick. Cost follows what is
due, not history.

The expired leases handed out are remembered for the caller (KEYS[3]) for
retry_ms, with the score each was pushed to. A caller that heard no reply
(or could not enqueue what it was handed) asks again with ARGV[5] = 1 and
gets back, beside what is due now, those nobody touched since: otherwise
they would wait the retry interval for another sweeper, and the takeover
that long past LEASE_TTL + GRACE + SWEEP_INTERVAL. Handing them out again
does not push them forward: a caller whose replies keep being lost (its
link is failing) holds them no longer than the retry interval from the
first hand-out, then any sweeper gets them.

KEYS[1] lease index (zset: ref -> lease_until ms)
KEYS[2] ready index (zset: ref -> ms when READY)
KEYS[3] the caller's last hand-out of expired leases (hash: ref -> score),
        in the shard's slot

ARGV[1] grace after lease_until, ms: a lease is due when lease_until + grace < now
ARGV[2] ready threshold, ms: a READY node is due when ready_at + threshold < now
ARGV[3] at most this many refs of each kind
ARGV[4] retry interval for expired leases, ms (READY entries wait the
        threshold again: a backlog must not cost an enqueue per tick)
ARGV[5] 1: hand out again the caller's last expired leases left untouched;
        0: remember this hand-out only; -1: neither (an anonymous caller)

Returns
  {now_ms, {expired_ref...}, {stale_ready_ref...}}
]]
local rcall = redis.call
local leaseKey, readyKey, lastKey = KEYS[1], KEYS[2], KEYS[3]
local grace, threshold = tonumber(ARGV[1]), tonumber(ARGV[2])
local limit, retry = tonumber(ARGV[3]), tonumber(ARGV[4])
local again = tonumber(ARGV[5])

local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function due(key, lag, again)
  local refs = rcall('ZRANGEBYSCORE', key, '-inf', '(' .. (now - lag), 'LIMIT', 0, limit)
  for _, ref in ipairs(refs) do
    rcall('ZADD', key, 'XX', now - lag + again, ref)
  end
  return refs
end

local expired = due(leaseKey, grace, retry)
local scores = {} -- ref -> the score each hand-out left it at
for _, ref in ipairs(expired) do scores[ref] = now - grace + retry end
local untouched = {}
if again == 1 then
  local last = rcall('HGETALL', lastKey)
  for i = 1, #last, 2 do
    local ref, score = last[i], tonumber(last[i + 1])
    -- Untouched: no one handed it out, claimed it or ended it since. It
    -- keeps its score: due again for everyone once the retry interval
    -- from the first hand-out has passed.
    if not scores[ref] and tonumber(rcall('ZSCORE', leaseKey, ref)) == score then
      scores[ref] = score
      untouched[#untouched + 1] = ref
    end
  end
end
if again >= 0 and (#expired > 0 or #untouched > 0) then
  rcall('DEL', lastKey)
  for ref, score in pairs(scores) do
    rcall('HSET', lastKey, ref, string.format('%d', score))
  end
  rcall('PEXPIRE', lastKey, retry)
end
for _, ref in ipairs(untouched) do expired[#expired + 1] = ref end

return {now, expired, due(readyKey, threshold, math.max(retry, threshold))}
