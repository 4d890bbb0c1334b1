// Package kinds holds the node kinds every stock runner ships: exec, http,
// sleep and noop. They exist so a run spec can do useful work without a Go
// program of its own, and so that the two kinds with side effects outside
// Redis hand the lease's fencing token to those side effects:
//
//	exec   BATON_FENCING_TOKEN, BATON_EPOCH, ... in the child's environment
//	http   Baton-Fencing-Token, Baton-Epoch and Idempotency-Key headers
//
// The scripts in Redis fence baton's own writes; a command or service that
// changes the world must check the token itself (see fence.Guard), because a
// paused worker's late side effect never passes through Redis.
//
// # Errors
//
// Every kind sorts its failures the same way, because the runtime retries
// what may succeed next time and fails the node at once on what cannot:
//
//	malformed input, HTTP 4xx, a bad URL     runner.Permanent: no retry
//	non-zero exit, HTTP 5xx, refused, timeout retryable while attempts remain
//	cancellation (user, lease lost, shutdown) wraps context.Cause(ctx)
//
// Inputs are decoded strictly: an unknown field is a Permanent error naming
// it, so a typo ("evn") fails the node instead of being silently ignored.
// Durations are Go duration strings ("1m30s") or numbers of seconds.
//
// # Results
//
// exec and http turn output into a result the same way: trimmed output that
// is valid JSON is kept as JSON, any other text becomes a JSON string, and
// empty output is null.
package kinds
