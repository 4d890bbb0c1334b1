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
// # Schedules
//
// PutSchedule stores a cron schedule (spec.Schedule) in Redis; FireDue is
// the step every runner's scheduler takes each interval. Schedules need no
// leader. A firer reads a due schedule (its generation g and next tick t,
// a due time and a wall-clock label), submits the tick's run under the id
// spec.TickRunID(name, t), and then moves the schedule from t to the next
// tick with schedule_fire.lua, a compare-and-set on (g, t). The two steps are separate calls (on a
// cluster the run and the schedule are in different slots), and each is
// safe under any interleaving of any number of firers:
//
//   - Submit is idempotent for the id: the same id with the same spec is
//     answered "exists" and changes nothing, so every firer of t, and every
//     retry after a lost reply, makes the one run. The same id with another
//     spec (t was submitted under an earlier definition) counts as fired.
//   - The move is taken only from t for g. The first firer moves it; a firer
//     of the same t hears that this same step is done (success, replayed);
//     one that read an older tick or generation, or a deleted schedule,
//     hears so and changes nothing.
//   - The move comes after the submit. A firer that dies or loses a reply
//     between them leaves the schedule at t, and the next firer submits t
//     again (a no-op) and moves it: a tick is never lost to a crash, and
//     never made twice.
//   - A thread busy under multitask "reject" refuses t's run; the move
//     records "skipped: thread busy". Were that move lost, a later firer
//     might find the thread idle and submit t: still one run for t.
//
// The one gap: a firer paused between reading t and submitting it for
// longer than the run retention, after which t's run was deleted, would
// submit it again. Ticks due longer ago than the caller's late window were
// missed (no runner was up) and follow the schedule's policy: skip them,
// or fire the latest once (spec.Ticks.Step).
//
// Floors: client sits on package spec, fence and internal/delivery (how a
// node's task is put on Asynq), below the worker runtime (package runner),
// which re-exports its names (runner.Client, runner.NewClient) for older
// code. Nothing here starts a goroutine that outlives a call.
package client
