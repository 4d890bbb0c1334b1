// Package delivery is how baton puts a node on Asynq: the task type, the
// payload (which node to claim, nothing more: delivery is a trigger, never
// authority), the deterministic task id per attempt, and Advance, which
// starts a thread's next run and enqueues its ready nodes.
//
// Both sides of the queue use it: package client when a submit, retry,
// resume or cancel makes nodes READY, and the worker runtime (package
// runner) when a commit, a sweep or a wait timeout does. Keeping it in one
// place is what keeps the two agreeing on the task id and payload. It is
// internal: the task format is not an API.
package delivery
