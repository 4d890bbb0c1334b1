--[[ locator: claim a run id for a run of a thread.

A run id names one run of one thread. The locator, in the run id's slot,
says which thread a run of a thread belongs to. A run without a thread
(its own thread) has none: its run hash, in that same slot, says it
exists, or its packed key once it is packed. So a run of a thread may take the id only if neither is there;
submit.lua refuses a run without a thread whose id a locator names for
another thread. Called before submit.lua for a run of a thread, whose
run hash is in its thread's slot.

KEYS[1] the run id's locator (string: run id -> thread)
KEYS[2] the run hash a run of that id without a thread would have
KEYS[3] the packed key such a run has once finished and packed into one
        string (lib/pack.lua)

ARGV[1] thread
ARGV[2] run id

Returns
  thread  the id is the thread's (now, or already: a retry)
  other   the thread, or the run id for a run without a thread, that
          holds it: nothing changed
]]
local owner = redis.call('GET', KEYS[1])
if owner then return owner end
if redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then return ARGV[2] end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
