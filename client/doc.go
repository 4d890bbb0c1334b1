// Package client submits, reads, follows, waits for, cancels, retries and
// resumes baton runs. It is what a program that only starts work imports:
// it links no worker runtime and no Prometheus (the Temporal SDK's client
// vs worker), so cmd/enqueue, a web service or a script stays small. Run
// and node states are typed (State); Wait returns when a run has ended.
//
//	spec.Run --Compile--> fence.SubmitArgs --Submit script--> Redis
//	                 \--> Asynq enqueue of the ready nodes (internal/delivery)
//
// Each operation is one call that does every step it needs: Submit records
// a run's webhook before the run and takes it back if the store refuses
// the run, enqueues the ready nodes (the first in the submit's own round
// trip, trip.go) and starts the thread's next run when its strategy cancelled
// the active one; Cancel starts the thread's next run when the cancel ended
// the run; Status says why a READY node waits. When an enqueue fails after
// the state was stored, the run is not lost (a runner's sweeper delivers
// READY nodes) and the error says so.
//
// Floors: client sits on package spec, fence and internal/delivery (how a
// node's task is put on Asynq), below the worker runtime (package runner),
// which re-exports its names (runner.Client, runner.NewClient) for older
// code. Nothing here starts a goroutine that outlives a call.
package client
