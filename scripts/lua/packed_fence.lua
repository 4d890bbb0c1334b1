--[[ packed_fence: the fence for a write to a node of a run packed into one
key (retain.lua packs a SUCCEEDED or FAILED run: lib/pack.lua).

A write script (commit, fail, release, heartbeat, park, checkpoint) that
finds no node hash answers "node missing" (-1). When the run is packed,
the caller asks this script instead, which answers as that script's fence
check would from the node's stored epoch and claim, in one step: a stale
epoch or another claim id is refused and recorded as a stale_rejected
event, as before the run was packed; the run's event stream, gone since
the packing, is made again for it, with the packed key's time to live, and
readers show its entries after the packed ones (fence/packed.go). A
commit by the claim that committed the node (its reply was lost) is
recognised as its own, and so is a fail, release or park by a claim that
ended the node's attempt so (lib/end_claim.lua): answered, before the
fence, as that script answered the first time. The node, ended, is not
RUNNING for any other write of the current claim (-12; a checkpoint's
refusal is recorded too, as checkpoint.lua records it). Nothing else
changes.

KEYS[1]  the run's packed key
KEYS[2]  the run's event stream

ARGV[1]  op: commit, fail, release, heartbeat, park, checkpoint or
         checkpoint_writes (the event's op)
ARGV[2]  node id
ARGV[3]  worker id (the event's worker)
ARGV[4]  epoch the caller claimed under
ARGV[5]  claim id the caller claimed under
ARGV[6]  event stream MAXLEN (approximate)
ARGV[7..] pairs of further event fields (a checkpoint's "ns", ns)

Returns
  2    a commit of this claim, which committed the node: nothing changed
  {2, reply...}
       a fail, release or park this claim ended the node's attempt with:
       reply is what fail.lua, release.lua or park.lua answered it
  -1   no packed run, or no such node in it
  -10  stale epoch: the node was claimed again since (recorded)
  -11  not owner: same epoch, another claim id (recorded)
  -12  the caller's claim is no longer RUNNING
]]
local rcall = redis.call
local packedKey, evKey = KEYS[1], KEYS[2]
local op, nodeID, worker, epoch, claimID, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local t = rcall('TIME')
local now = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
--@include fence_check
--@include pack
--@include unpack
--@include packed_fence
--@include end_claim

if op == 'fail' or op == 'release' or op == 'park' then
  local packed = rcall('GET', packedKey)
  local run, nodes = unpackRun(packed, true)
  if run then
    for i, id in ipairs(cjson.decode(run.nodes or '[]')) do
      local node = nodes[i]
      if id == nodeID and node then
        local code, extra = endedAs(node.end_claim, op, claimID)
        if code then
          if op == 'fail' and code == '1' then return {2, 1, tonumber(extra)} end
          if op == 'release' and code == '1' then return {2, 1, ''} end
          if op == 'park' and code == '4' then return {2, 1, node.wait_id or ''} end
          if op == 'fail' then return {2, tonumber(code), run.status} end
          return {2, 3, run.status}
        end
      end
    end
  end
end
return packedRefusal(packedKey, op, unpack(ARGV, 7))
