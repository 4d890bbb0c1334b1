// Command bench measures what fencing costs: in one run, against one
// Redis, it drains N no-op tasks through a bare Asynq server and N no-op
// nodes through a baton runner.Worker (claim and commit under a fenced
// lease, every node), with the same concurrency and poll interval, and
// prints both throughputs, their ratio and the Redis round trips each spent
// per task. Beside them it drains N no-op jobs through BullMQ, the fenced
// peer (its lock token is checked when a job completes), with completed
// jobs kept and removed, in a node process of the npm package in
// cmd/bench/bullmq; without node or that package it says BullMQ was
// skipped.
//
// Every task is enqueued (or every run submitted) while the queue is paused,
// then the queue is unpaused and the clock runs from the first delivery to
// the last task's end and, for baton, every finished run retained (Asynq
// deletes a finished task as it marks it done): the drain figure is
// processing throughput alone.
// Submission is measured on its own. Each measurement starts with a
// warm-up on the same server.
//
// Further sections (-sections) measure what a user of a fenced runner
// asks next: each script's Redis cost alone, latency at a fixed rate,
// cancel latency, takeover after a kill, heartbeat round trips per tick,
// memory per finished node and the sweeper's cost with many finished
// nodes present. The output ends with one JSON line of every figure.
//
// The bench writes only to one Redis database (-db, default 15), which it
// empties with FLUSHDB before each measurement and at the end. It refuses a
// database that holds keys unless -flush is given. Exit status: 0 ok, 1 the
// bench failed or refused, 2 bad flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills at once.
	go func() { <-ctx.Done(); stop() }()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
