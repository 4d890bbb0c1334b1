-- retain_run: what retention does to one finished run's keys, kept in one
-- place for retain.lua (the retention sweep) and commit.lua (which retains
-- a one-node run in the step that ends it). A script includes it after
-- defining rcall and including lib/stream.lua.
--
-- A SUCCEEDED run never changes again while its keys live: retry.lua
-- refuses it, and submit.lua answers its id with the stored run. Its hashes
-- keep only what a reader shows or a replayed write compares (state, epoch,
-- claim). The scripts store no field at its default (no dependencies, no
-- releases, no timeout) nor the ids the key names carry (submit.lua), and
-- readers assume them; what a SUCCEEDED run's hashes can still hold that
-- it no longer needs is a live node's (lease, remaining dependencies, how
-- an attempt ended, when it was due, the incarnation a claim returns, its
-- progress: a SUCCEEDED node reads as 100) and, in a run stored before
-- that, the ids, the run's zero counters and the update times no reader
-- used: one HDEL per hash, with nothing read first, drops them. The
-- commit that retains a one-node run leaves its run hash alone and drops
-- from its node only what a live node holds: a field that is not there
-- costs HDEL a walk of the whole hash. Fields left by a run
-- stored before an upgrade then stay until its time to live. Runs that
-- can be retried keep every field.
--
-- The run's stream was stored at its size when submitted (lib/stream.lua,
-- included before this); one that grew a new stream node since, or was
-- submitted before streams were compacted at submit, holds a 4 KiB
-- preallocation and is stored at its size again here.

-- slimSucceeded drops from a SUCCEEDED run's hashes what it no longer
-- needs: all of it (the sweep) or, byCommit, only a live node's fields.
-- retain.lua calls it before packing a run into one key.
local function slimSucceeded(runKey, nodeKeys, byCommit)
  -- The lists are built here, only the one used: building a table of
  -- strings in every call cost a commit 4% of its instructions.
  local drop
  if byCommit then
    -- What a RUNNING node of a one-node run can hold that a SUCCEEDED
    -- one does not need, as these scripts store it: no remaining
    -- dependencies, and a claim drops how an earlier attempt ended.
    drop = {'lease_until', 'heartbeat_at', 'ready_at', 'inc', 'progress'}
  else
    -- What a SUCCEEDED run's hashes no longer need: a live node's
    -- fields (its lease, when it was due, its run's incarnation, its
    -- progress), and what a run stored before they were left out still
    -- holds (the ids, the zero counters failed and cancel, updated_at,
    -- a node's created_at).
    rcall('HDEL', runKey, 'id', 'thread', 'failed', 'cancel', 'updated_at')
    drop = {'id', 'run', 'thread', 'remaining', 'lease_until', 'heartbeat_at', 'end_op',
      'ready_at', 'inc', 'progress', 'updated_at', 'created_at'}
  end
  for _, key in ipairs(nodeKeys) do rcall('HDEL', key, unpack(drop)) end
end

-- retainRun gives runKey, each of nodeKeys (the run's node hashes) and each
-- of otherKeys (its locator, when in this slot) the time to live ttl ms,
-- or none when ttl is -1 (kept forever); it slims a SUCCEEDED run's
-- hashes, all of what they may hold (the sweep) or, byCommit, only a
-- live node's fields; and it stores evKey, the run's event stream, again
-- at its size. status is the run's status, as the caller read it.
local function retainRun(runKey, evKey, nodeKeys, otherKeys, ttl, status, byCommit)
  if status == 'SUCCEEDED' then slimSucceeded(runKey, nodeKeys, byCommit) end
  -- The time to live as text: Redis formats a Lua number at a cost
  -- (lib/clock.lua).
  local ttlS = string.format('%d', ttl)
  if ttl > 0 then
    rcall('PEXPIRE', runKey, ttlS)
    for _, key in ipairs(nodeKeys) do rcall('PEXPIRE', key, ttlS) end
    for _, key in ipairs(otherKeys) do rcall('PEXPIRE', key, ttlS) end
  end
  local compacted = streamPreallocated(evKey) and compactStream(evKey, math.max(ttl, 0))
  if not compacted and ttl > 0 then rcall('PEXPIRE', evKey, ttlS) end
end
