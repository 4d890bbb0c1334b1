package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/runner/admin"
	"github.com/batonrun/baton/runner/kinds"
	"github.com/batonrun/baton/tracing/otelsdk"
)

// adminStopTimeout bounds how long in-flight admin requests may take to
// finish once the worker has drained.
const adminStopTimeout = 5 * time.Second

// run starts the worker and the admin server, and drains both when ctx is
// cancelled. It returns nil after a clean shutdown.
func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	redis.SetLogger(redisLogger{log.With("component", "go-redis")})
	rconf := cfg.Redis
	if cfg.Embedded {
		// Bound to 127.0.0.1 with a random password: another user of this
		// machine cannot reach the store (and so cannot rewrite results
		// or start commands). The URL with the password is printed for
		// the person who started the runner, on its own stderr.
		pass := make([]byte, 24)
		_, _ = rand.Read(pass) // never fails (crypto/rand)
		m := miniredis.NewMiniRedis()
		m.RequireAuth(hex.EncodeToString(pass))
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("embedded redis: %w", err)
		}
		defer m.Close()
		rconf = redisconn.Config{URL: "redis://:" + hex.EncodeToString(pass) + "@" + m.Addr() + "/0"}
		log.Warn("embedded_redis", "redis_url", rconf.URL, "addr", m.Addr(),
			"note", "in-process miniredis for trying baton out, password-protected: runs are lost on exit, one runner only")
	}
	rdb, err := rconf.Open()
	if err != nil {
		return err
	}
	defer rdb.Close()
	// Node attempts are spans of their run's trace when the OTEL_*
	// variables ask for it; otherwise tracing costs nothing.
	stopTracing := otelsdk.Setup(ctx, "baton-runner", log)
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(fctx)
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	queues, _ := parseQueues(cfg.Queues) // validated
	reg.MustRegister(runner.NewQueueCollector(rdb, slices.Sorted(maps.Keys(queues))))
	var history *os.File
	if cfg.HistoryFile != "" {
		history, err = os.OpenFile(cfg.HistoryFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("HISTORY_FILE: %w", err)
		}
		defer history.Close()
	}
	// The stock kinds KINDS names, with what the operator lets jobs reach
	// (jobs.go), published with the worker's advertisement: every submit,
	// through the API or not, refuses at once what a spec asks beyond it.
	stock, kindNames := cfg.stock(rconf)
	w, err := runner.NewWorker(runner.WorkerConfig{
		Jobs:              stock.Rules(kindNames),
		Redis:             rdb,
		Prefix:            cfg.Prefix,
		ID:                cfg.RunnerID,
		Concurrency:       cfg.Concurrency,
		Dispatchers:       cfg.Dispatchers,
		PollInterval:      cfg.PollInterval,
		Queues:            queues,
		LeaseTTL:          cfg.LeaseTTL,
		HeartbeatInterval: cfg.heartbeat(),
		Grace:             cfg.Grace,
		SweepInterval:     cfg.SweepInterval,
		ShutdownTimeout:   cfg.ShutdownTimeout,
		Retention:         cfg.Retention,
		ReadyThreshold:    cfg.ReadyThreshold,
		Logger:            log,
		Metrics:           runner.NewMetrics(reg),
		History:           historyOrNil(history),
		ClaimReplicas:     cfg.ClaimReplicas,
		NoTake:            !cfg.TakeFromQueue,
		ScheduleInterval:  cfg.ScheduleInterval,
		ScheduleLate:      cfg.ScheduleLate,
		ScheduleLimits:    runner.Limits{MaxInputBytes: cfg.MaxInputBytes},

		ThreadRetention:    cfg.ThreadRetention,
		CheckpointHistory:  cfg.CheckpointHistory,
		MaxCheckpointBytes: cfg.MaxCheckpointBytes,
	})
	if err != nil {
		return err
	}
	kinds.RegisterStockOnly(w, stock, kindNames)
	stopGraphs, graphs, err := startGraphs(ctx, cfg, w, rconf, log) // graphs.go
	if err != nil {
		return err
	}
	defer stopGraphs()
	clientLimits := runner.Limits{MaxInputBytes: cfg.MaxInputBytes, MaxSpecBytes: cfg.MaxSpecBytes}
	client, err := runner.NewClient(runner.ClientConfig{Redis: rdb, Prefix: cfg.Prefix, Limits: clientLimits})
	if err != nil {
		return err
	}
	defer client.Close()
	// Each limit's use, read from Redis at each scrape (docs/observability.md).
	reg.MustRegister(runner.NewLimitCollector(client.Store()))
	if err := loadLimits(ctx, cfg.LimitsFile, client, log); err != nil { // limits.go
		return err
	}

	// Listen before starting the worker: a taken port fails the start
	// instead of leaving a worker nobody can probe.
	var (
		srv *http.Server
		ln  net.Listener
	)
	if cfg.AdminAddr != "" {
		// The server's timeouts bound what a slow or silent client costs,
		// before authentication too.
		proxies, _ := admin.ParseTrustedProxies(cfg.TrustedProxy) // validated
		srv, err = admin.NewServer(admin.Config{Client: client, Redis: rdb, Gatherer: reg, Token: cfg.APIToken,
			Logger: log, TraceURL: cfg.TraceURL, MaxBodyBytes: max(admin.DefaultMaxBodyBytes, 2*int64(cfg.MaxInputBytes)),
			TrustedProxies: proxies, MonitorReadOnly: cfg.MonitorReadOnly, Redact: stock.Exec.Redact,
			FollowersPerClient: cfg.EventStreamsPerClient, FollowMaxAge: cfg.EventStreamMaxAge})
		if err != nil {
			return err
		}
		if ln, err = listenAdmin(cfg.AdminAddr, cfg.adminAddrDefault, cfg.APIToken != "", log); err != nil {
			return fmt.Errorf("admin server: %w", err)
		}
		defer ln.Close()
	}
	agentSrv, agentLn, closeAgent, err := agentAPIServer(cfg, rconf, clientLimits, graphs, log) // agentapi.go
	if err != nil {
		return err
	}
	defer closeAgent()
	if agentLn != nil {
		defer agentLn.Close()
	}

	if err := w.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped by a signal while starting: nothing ran
		}
		return fmt.Errorf("start worker (is Redis up at %s?): %w", rconf, err)
	}
	if old, err := client.Store().OldLayout(ctx); err == nil && len(old) > 0 {
		log.Warn("old_key_layout", "keys", old, "note", "runs stored by a version before the sharded key "+
			"layout are not seen by this one: drain them with that version")
	}
	// Run-completion webhooks: every runner scans for ended runs that
	// notify and delivers them from its own queue.
	notifier, err := runner.NewNotifier(runner.NotifierConfig{Redis: rdb, Prefix: cfg.Prefix,
		Secret: cfg.WebhookSecret, Retention: cfg.Retention, Logger: log, Egress: stock.HTTP.Egress})
	if err == nil {
		err = notifier.Start(ctx)
	}
	if err != nil {
		w.Shutdown()
		return err
	}
	defer notifier.Shutdown()
	serveErr := make(chan error, 2)
	if srv != nil {
		go func() { serveErr <- fmt.Errorf("admin server: %w", srv.Serve(ln)) }()
		base := listenURL(ln.Addr()) // listen.go
		log.Info("admin_listening", "addr", ln.Addr().String(), "url", base+"/",
			"monitor", base+admin.MonitorPath+"/", "api", base+"/v1/runs", "token_required", cfg.APIToken != "")
	}
	if agentSrv != nil {
		go func() { serveErr <- fmt.Errorf("agent server API: %w", agentSrv.Serve(agentLn)) }()
		log.Info("agent_api_listening", "addr", agentLn.Addr().String(), "url", listenURL(agentLn.Addr()),
			"token_required", cfg.APIToken != "")
	}
	log.Info("runner_ready", "worker", w.ID(), "queues", cfg.Queues)

	var failure error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		failure = err
	}
	w.Shutdown()
	if srv != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminStopTimeout)
		defer cancel()
		if err := srv.Shutdown(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			log.Warn("admin_shutdown", "err", err)
		}
	}
	if agentSrv != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), adminStopTimeout)
		defer cancel()
		if err := agentSrv.Shutdown(stopCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			log.Warn("agent_api_shutdown", "err", err)
		}
	}
	if failure == nil {
		log.Info("runner_stopped")
	}
	return failure
}

// redisLogger routes go-redis's internal messages (pool dial failures)
// through slog instead of the standard logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn("redis_client", "msg", fmt.Sprintf(format, v...))
}

// historyOrNil keeps a nil *os.File from becoming a non-nil io.Writer.
func historyOrNil(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	return f
}
