--[[ trace: give a run submitted without a trace context the one the
first runner to run a node of it started (its root span), unless the
run has one: every attempt of the run then joins one trace. A retry after
a lost reply finds its own value and answers the same.

KEYS[1] the run hash

ARGV[1] the trace context (tracing.Carrier) the caller proposes

Returns
  trace  the run's trace context: ARGV[1], or the one it already had
  ''     the run does not exist: nothing changed
]]
local rcall = redis.call
if rcall('EXISTS', KEYS[1]) == 0 then return '' end
local cur = rcall('HGET', KEYS[1], 'trace')
if not cur or cur == '' then
  cur = ARGV[1]
  rcall('HSET', KEYS[1], 'trace', cur)
end
return cur
