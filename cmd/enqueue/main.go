// Command enqueue submits, inspects, watches and cancels baton runs from a
// shell. It is the interface scripts rely on: stdout carries only results
// (a run id, a status, JSON), stderr carries messages, and the exit status
// says what happened: 0 ok, 1 refused or failed, 2 bad input.
//
// Configuration comes from the environment (see usage.go); the commands live
// one per file, each parsing its flags and calling into packages client and
// spec: it links no worker runtime.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, a second one kills at once.
	go func() { <-ctx.Done(); stop() }()

	a := &app{
		stdin:    os.Stdin,
		stdout:   os.Stdout,
		stderr:   os.Stderr,
		tty:      isTerminal(os.Stdout),
		termSize: func() (int, int) { return termSize(os.Stdout) },
	}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// newLogger writes diagnostics to stderr at level; results never go there.
func newLogger(a *app, level slog.Level) *slog.Logger {
	h := slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level})
	return slog.New(h).With("component", "enqueue")
}
