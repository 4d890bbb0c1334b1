// Command chaos is baton's fault harness. It runs a real redis-server (AOF,
// fsync always), a fleet of real runner processes, each reaching Redis
// through its own TCP proxy, and the fenced downstream service; submits runs
// of exec, http and sleep nodes; and for the whole window injects a
// schedule of faults drawn from the seed: runners paused past their lease,
// killed or drained and restarted; connections reset, replies lost, traffic
// stalled or swallowed; Redis killed and restarted from its AOF; duplicate
// deliveries of live nodes. Beside those runs, a few conversations
// (threads.go) submit runs to threads with every multitask strategy
// (reject, enqueue, interrupt, rollback) and without a thread, cancel some,
// and run Go nodes (on agent workers, cmd/chaos/agent) and exec nodes that
// save a checkpoint every step. And runs of the flow workload (flow.go)
// name fleet-wide limits (a concurrency of 1, of 3, a rate) the harness set
// as an operator does, or park a node that the harness resumes, some
// resumes with their reply lost and sent again, some answered twice.
// Then it heals everything, waits for the runs to
// end, and checks what happened (package internal/chaos/check): the
// runners' protocol histories against a model of the node register, and
// the outcome against baton's guarantees, the limits and the waits
// included.
//
//	go run ./cmd/chaos -seed 7 -duration 5m -runners 3 -threads 6 -out /tmp/chaos
//
// -recheck DIR judges a finished run's out dir again (after a checker fix,
// or for a post-mortem) without running anything.
//
// It prints a summary, every violation, and a final JSON line
// {"seed","duration_s","faults","runs","nodes","ops","violations"}. Exit
// status: 0 when nothing was violated, 1 on a violation, 2 for bad flags or
// when the harness itself could not run.
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
	"path/filepath"
	"syscall"
	"time"
)

// config is what the flags set.
type config struct {
	seed     uint64
	duration time.Duration // the fault window
	settle   time.Duration // the bounded wait for runs to end after it
	runners  int
	agents   int           // agent workers (the conversations' Go kind)
	threads  int           // conversations; 0: none
	runs     int           // 0: two runs per second of the window
	flow     int           // limits-and-waits runs; 0: one per 2 s of the window, -1: none
	out      string        // empty: a new temporary directory, kept for a post-mortem
	slack    time.Duration // takeover bound's allowance for delivery
	bin      string        // prebuilt binaries; empty: go build
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.Uint64Var(&cfg.seed, "seed", uint64(time.Now().UnixNano()%1_000_000), "seed of the fault schedule and the workload")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Minute, "how long faults are injected")
	fs.DurationVar(&cfg.settle, "settle", 90*time.Second, "how long to wait, after healing, for every run to end")
	fs.IntVar(&cfg.runners, "runners", 3, "runner processes")
	fs.IntVar(&cfg.threads, "threads", 6, "conversations: threads whose runs use every multitask strategy and save checkpoints (0: none)")
	fs.IntVar(&cfg.agents, "agents", 2, "agent workers, serving the conversations' Go nodes (with -threads)")
	fs.IntVar(&cfg.runs, "runs", 0, "runs to submit (0: two per second of the window)")
	fs.IntVar(&cfg.flow, "flow", 0, "runs naming limits or parking a node, resumed by the harness (0: one per 2 s of the window; -1: none)")
	fs.StringVar(&cfg.out, "out", "", "directory for Redis's AOF, logs, histories and visualisations (default: a new temporary one)")
	fs.DurationVar(&cfg.slack, "slack", time.Second, "allowance for delivery in the takeover bound")
	fs.StringVar(&cfg.bin, "bin", "", "directory with prebuilt runner, downstream and agent binaries (default: go build)")
	recheckDir := fs.String("recheck", "", "check a finished run's out dir again instead of running one")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *recheckDir != "" {
		res, err := recheck(*recheckDir, cfg.slack)
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
			return 2
		}
		res.print(stdout)
		if len(res.report.Violations) > 0 {
			return 1
		}
		return 0
	}
	if cfg.runners < 2 || cfg.duration < 10*time.Second || fs.NArg() > 0 || cfg.threads < 0 ||
		(cfg.threads > 0 && cfg.agents < 2) || cfg.flow < -1 {
		fmt.Fprintln(stderr, "chaos: want -runners >= 2, -duration >= 10s, -threads >= 0, -agents >= 2 with threads, -flow >= -1, and no arguments")
		return 2
	}
	if cfg.threads == 0 {
		cfg.agents = 0
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "chaos")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runHarness(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return 2
	}
	res.print(stdout)
	if len(res.report.Violations) > 0 {
		return 1
	}
	return 0
}

// prepareOut makes the out dir's subdirectories, emptying those a previous
// run left: histories of two runs must never be checked as one.
func prepareOut(out string) error {
	for _, sub := range []string{"redis", "runners", "history"} {
		p := filepath.Join(out, sub)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	old, _ := filepath.Glob(filepath.Join(out, "porcupine-*.html"))
	for _, f := range append(old, filepath.Join(out, "admits.jsonl"), filepath.Join(out, "faults.jsonl"),
		filepath.Join(out, "runs.jsonl"), filepath.Join(out, "meta.json"), filepath.Join(out, "threads.json"),
		filepath.Join(out, "flow.json")) {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}
