-- clock: Redis's time, read once, for the scripts on a node's path (submit,
-- claim, heartbeat, commit). A script includes it after defining rcall.
--
-- now is the time in ms, for arithmetic; nowS is the same time as text,
-- for the commands that store it. Redis 7.0 turns every Lua number handed
-- to redis.call into text with snprintf("%.17g"), about 3,000 instructions
-- each (callgrind); int's "%d" costs a fraction of that. So these scripts
-- hand redis.call text, each number formatted once.
local t = rcall('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function int(n) return string.format('%d', n) end
local nowS = int(now)
