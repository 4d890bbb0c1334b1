// Command runner is baton's worker: it runs the nodes of runs delivered by
// Asynq under fenced leases, with the stock node kinds (exec, http, sleep,
// noop), and serves the admin HTTP routes (probes, metrics, the Asynq UI,
// the run API; see package runner/admin).
//
// Configuration comes from the environment (config.go; `runner -h` lists
// it). Exit status: 0 after a clean shutdown, 1 when the runner failed or
// was stopped by a second signal, 2 for bad flags or configuration, with
// every problem listed.
//
// SIGTERM or SIGINT drains the worker: no new nodes, running ones are told
// to stop and have SHUTDOWN_TIMEOUT to reach a safe point, their leases are
// released for another worker to resume at once; then the admin server
// stops. A second signal exits at once; lease expiry recovers what was
// running.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/batonrun/baton/runner"
)

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	os.Exit(realMain(os.Args[1:], environ(), os.Stderr))
}

func realMain(args []string, environ map[string]string, stderr io.Writer) int {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	embedded := fs.Bool("embedded", false, "run an in-process Redis (miniredis): nothing to install, state is lost on exit")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() { usage(fs, stderr) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "runner: unexpected arguments %q (configuration comes from the environment; see runner -h)\n", fs.Args())
		return exitUsage
	}
	if *version {
		fmt.Fprintln(stderr, "runner", runner.Version())
		return exitOK
	}
	cfg, err := loadConfig(environ, *embedded)
	if err != nil {
		fmt.Fprintln(stderr, "runner: invalid configuration:")
		for line := range strings.SplitSeq(err.Error(), "\n") {
			fmt.Fprintln(stderr, "  -", line)
		}
		return exitUsage
	}
	log := newLogger(cfg, stderr)

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	go func() {
		s := <-sigs
		log.Info("shutdown_signal", "signal", s.String(), "shutdown_timeout", cfg.ShutdownTimeout)
		cancel(fmt.Errorf("signal %s", s))
		s = <-sigs
		log.Warn("second_signal_exiting_now", "signal", s.String())
		os.Exit(exitFailed)
	}()

	if err := run(ctx, cfg, log); err != nil {
		log.Error("runner_failed", "err", err)
		return exitFailed
	}
	return exitOK
}

// newLogger builds the process's logger from LOG_LEVEL and LOG_FORMAT and
// makes it the default, so libraries that log to slog.Default agree.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel) // validated
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if strings.EqualFold(cfg.LogFormat, "json") {
		h = slog.NewJSONHandler(w, opts)
	}
	log := slog.New(h)
	slog.SetDefault(log)
	return log
}

func environ() map[string]string {
	out := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}
