// Command agent is the fault harness's Go-kind worker: a baton runtime that
// serves only the chaos-agent kind (internal/chaos/agent), so that the
// conversation workload of cmd/chaos runs Go nodes in processes the harness
// can pause, kill and cut off, beside the stock runners that run its exec
// nodes. It reads the runner's environment (REDIS_URL, RUNNER_ID,
// CONCURRENCY, LEASE_TTL, HEARTBEAT_INTERVAL, GRACE, SWEEP_INTERVAL,
// SHUTDOWN_TIMEOUT, READY_THRESHOLD, HISTORY_FILE), logs runner_ready once
// it serves, and drains on SIGTERM.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/batonrun/baton/internal/chaos/agent"
	"github.com/batonrun/baton/runner"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", "chaos-agent")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, log)
	stop()
	if err != nil {
		log.Error("agent_failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	var errs []error
	dur := func(name string) time.Duration {
		v := os.Getenv(name)
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return d
	}
	cfg := runner.WorkerConfig{ID: os.Getenv("RUNNER_ID"), LeaseTTL: dur("LEASE_TTL"),
		HeartbeatInterval: dur("HEARTBEAT_INTERVAL"), Grace: dur("GRACE"), SweepInterval: dur("SWEEP_INTERVAL"),
		ShutdownTimeout: dur("SHUTDOWN_TIMEOUT"), ReadyThreshold: dur("READY_THRESHOLD"), Logger: log,
		// Its own queue: on the runners' queue it would take their nodes'
		// deliveries, refuse them (a kind it does not run) and hand them back
		// later, delaying their takeovers past the checker's bound.
		Queues: map[string]int{agent.Queue: 1}}
	if v := os.Getenv("CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("CONCURRENCY: %w", err))
		}
		cfg.Concurrency = n
	}
	if len(errs) > 0 {
		return fmt.Errorf("config: %v", errs)
	}
	rdb, err := runner.OpenRedis(cmp.Or(os.Getenv("REDIS_URL"), runner.DefaultRedisURL))
	if err != nil {
		return err
	}
	defer rdb.Close()
	cfg.Redis = rdb
	if p := os.Getenv("HISTORY_FILE"); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("HISTORY_FILE: %w", err)
		}
		defer f.Close()
		cfg.History = f
	}
	w, err := runner.NewWorker(cfg)
	if err != nil {
		return err
	}
	w.Register(agent.Kind, runner.KindFunc(agent.Run))
	if err := w.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("start worker: %w", err)
	}
	log.Info("runner_ready", "worker", w.ID())
	<-ctx.Done()
	w.Shutdown()
	log.Info("runner_stopped", "worker", w.ID())
	return nil
}
