// Package e2e holds baton's end-to-end fault suite: the runner and enqueue
// binaries, built once, run as real processes against a real redis-server,
// and are killed, drained and paused with real signals.
package e2e
