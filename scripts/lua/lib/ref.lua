-- ref: the thread and run ids the ref prefix "thread:run:" names, for the
-- scripts given the prefix that need the ids (commit.lua, cancel.lua). A
-- script includes it after defining refPrefix; ids hold no ":"
-- (fence/ids.go), and both are nil when the prefix is not "thread:run:".
--
-- The match is written here once, not in a function: a call costs a
-- commit some 500 instructions more, and two plain finds and two subs
-- instead of the pattern 1,700 more (callgrind).
local threadID, runID = string.match(refPrefix, '^([^:]*):([^:]*):$')
