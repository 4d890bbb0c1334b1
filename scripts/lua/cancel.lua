--[[ cancel: cancel a run.

Sets the run's cancel flag. BLOCKED, READY and WAITING (parked) nodes become
CANCELLED at once.
When nodes are RUNNING, the script PUBLISHes the run on ARGV[5] in the same
atomic step, so whoever cancels (a Go client, the CLI, the HTTP API, another
language) pushes the cancel to the workers that own them; their heartbeat's
cancel flag is the fallback when a push is lost. RUNNING nodes end CANCELLED
when their owner stops (fail.lua, release.lua) or their lease expires. A
cancel of a cancelled run changes nothing but pushes again while nodes still
run.

A READY node with limits that ends here leaves its limits' waiters, and a
slot handed to it (woken, not yet claimed) goes to the next waiter at
once, in this script (lib/cancel_run.lua): a cancelled waiter keeps no
slot. That needs the holders hash and waiters zset of each limit key of
the run's READY nodes after the node hashes; without one, nothing changes
and -31 names the limit keys, for the caller to call again with them.

KEYS[1]   run hash
KEYS[2]   run event stream
KEYS[3]   ready index (zset: ref -> ms when READY)
KEYS[4]   finished index (zset: "thread:run:" -> ms when the run ended)
KEYS[5]   the run's thread's queue (list of waiting run ids): a run
          cancelled while QUEUED leaves it at once, so it no longer keeps
          its thread busy
KEYS[6..] every node hash of the run, in the order of ARGV[6..]; then,
          per limit key of its READY nodes, its holders hash and waiters
          zset (lib/limits.lua); or, on a Redis Cluster, where those live
          in other slots, the run hash once more: nothing is asked, and
          a slot handed to a cancelled waiter is given back at its next
          claim (claim.lua's {-3, limits}, limit_free.lua)

ARGV[1]   reason
ARGV[2]   who asked (recorded as the event's worker)
ARGV[3]   ref prefix "thread:run:" (a node's ref is prefix .. node id)
ARGV[4]   event stream MAXLEN (approximate)
ARGV[5]   Pub/Sub channel for the push, or "" for none; the message is the
          run id, followed by "~" and the run's incarnation when it has one
ARGV[6..] node ids

Returns
  {1, run_status, running}  cancelled; running nodes still finishing; a
         trailing {woken...} ("ref|queue") lists the waiters handed the
         slots of cancelled nodes, for the caller to enqueue
  {2, run_status, running}  the run was already cancelled (no change); a
         trailing {woken...} names again the waiters the cancel handed a
         slot to (noted on the run hash, lib/woke.lua): a retried cancel
         whose reply was lost wakes them then
  -1   run missing
  -22  the run already finished
  {-31, keys}  a READY node names limit keys ("k1,k2") whose keys were not
         passed: call again with them; nothing changed
]]
local rcall = redis.call
local runKey, evKey, readyKey, finKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local reason, who, refPrefix, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
--@include ref
--@include limits
--@include cancel_run

local nodes, ids = {}, {}
for i = 6, #ARGV do
  nodes[#nodes + 1] = KEYS[i]
  ids[#ids + 1] = ARGV[i]
end
local lim = limitKeysFrom(#ARGV + 1) or {}
local elsewhere = KEYS[#ARGV + 1] == runKey -- a Redis Cluster's
local queued = rcall('HGET', runKey, 'status') == 'QUEUED'
local t = rcall('TIME')
local did, status, running, wakes = cancelRun({run = runKey, ev = evKey, ready = readyKey, fin = finKey,
  prefix = refPrefix, id = runID, nodes = nodes, ids = ids, reason = reason, who = who, channel = ARGV[5],
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), lim = lim, limPartial = elsewhere})
if did == 'missing' then return -1 end
if did == 'limits' then return {-31, status} end
if did == 'finished' then return -22 end
if did == 'already' then
--@include woke
  return {2, status, running, wokeAgain(runKey, '-')}
end
if queued then rcall('LREM', KEYS[5], 0, runID) end
if wakes and #wakes > 0 then
  rcall('HSET', runKey, 'woke', '- ' .. table.concat(wakes, ' '))
  return {1, status, running, wakes}
end
return {1, status, running}
