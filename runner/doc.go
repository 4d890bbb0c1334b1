// Package runner is baton's worker runtime: it adapts package fence to
// Asynq and owns the goroutines that run nodes. A Worker claims each
// delivered node, runs its Kind under a lease kept by the heartbeater,
// commits or fails it fenced by its epoch, hands dependents on (a commit
// may claim the next node in the same step), watches for cancels, and
// sweeps what a lost delivery or a dead worker left behind. Metrics are
// its Prometheus series; Notifier posts the runs' webhooks.
//
// The packages, one role each, in floors that import only downward:
//
//	cmd/runner, cmd/enqueue, ...    configuration, logging, signals
//	runner (+ admin, kinds)          worker runtime, HTTP face, stock kinds
//	client                           submit, read, follow, cancel, retry, resume
//	spec, internal/delivery          the run-spec language; Asynq's task format
//	fence (+ fence/ids), redisconn   ownership protocol over Redis; connections
//	scripts/lua                      one Lua script per operation
//
// A program that only submits imports client and spec and links none of
// this package. The names that moved out (Client, RunSpec, ParseSpec,
// RedisConfig, ...) stay here as aliases so that older code compiles.
package runner
