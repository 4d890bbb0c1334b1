--[[ guard: admit a fencing token at a downstream service, or refuse it.

A service that performs side effects (deploy, payment, email) keeps, per
resource (run/node), the newest epoch it has admitted and the claim id that
came with it. A token is admitted when its epoch is newer (it becomes the
record) or equal with the same claim id (the same owner retrying). It is
refused when its epoch is older, or equal with another claim id (baton's
Redis issued the same epoch twice after a failover lost a claim). An admit
refreshes the record's expiry; a refusal changes nothing.

Epochs are compared as decimal strings, by length and then byte by byte:
exact for every int64, where Lua's doubles are not past 2^53. The caller
sends them with no sign and no leading zeros.

KEYS[1] guard record of the resource (hash: epoch, claim)

ARGV[1] token epoch, decimal, at least 1
ARGV[2] token claim id
ARGV[3] record ttl, ms; 0: the record never expires

Returns
  1              admitted: a newer epoch, now the record
  2              admitted: the recorded epoch and claim id again (a retry)
  {-10, epoch}   stale: the record holds the newer epoch returned
  {-11, epoch}   not owner: the recorded epoch, another claim id
]]
local rcall = redis.call
local key = KEYS[1]
local epoch, claim, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])

-- older reports whether decimal a is below decimal b.
local function older(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local f = rcall('HMGET', key, 'epoch', 'claim')
local seen = f[1]
local code = 1
if seen then
  if older(epoch, seen) then return {-10, seen} end
  if epoch == seen then
    if f[2] ~= claim then return {-11, seen} end
    code = 2
  end
end
if code == 1 then rcall('HSET', key, 'epoch', epoch, 'claim', claim) end
if ttl > 0 then rcall('PEXPIRE', key, ttl) else rcall('PERSIST', key) end
return code
