package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/batonrun/baton/agentapi"
	"github.com/batonrun/baton/langgraph"
	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/runner"
)

// startGraphs serves the graphs of LANGGRAPH_CONFIG, if set, as the node
// kind "graph": it reads the project's langgraph.json and starts the graph
// worker, which imports every graph before the runner claims anything, so
// a graph that fails to import stops the start with its traceback. The
// returned func stops the worker; the graphs are what the Agent Server API
// serves (nil without LANGGRAPH_CONFIG).
//
// The graphs are the operator's own code, not a job's: their worker gets
// the runner's environment and writes fenced checkpoints in the runner's
// Redis. In cluster and sentinel modes there is no URL to hand it.
func startGraphs(ctx context.Context, cfg Config, w *runner.Worker, rconf redisconn.Config, log *slog.Logger) (func(), agentapi.Graphs, error) {
	if cfg.LangGraphConfig == "" {
		return func() {}, nil, nil
	}
	var redisURL string
	if rconf.Mode() == "url" {
		redisURL = cmp.Or(rconf.URL, redisconn.DefaultURL)
	}
	p, err := langgraph.Load(cfg.LangGraphConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("LANGGRAPH_CONFIG: %w", err)
	}
	// The worker runs in the project's folder: a relative path to an
	// interpreter (.venv/bin/python) means the runner's own folder, as the
	// shell that set it meant it.
	python, node := absIfPath(cfg.LangGraphPython), absIfPath(cfg.LangGraphNode)
	k, err := langgraph.New(p, langgraph.Options{Python: python, Node: node,
		JSWorker: cfg.LangGraphJSWorker, RedisURL: redisURL, Env: list(cfg.Jobs.ExecEnv),
		Prefix: cfg.Prefix, MaxAttempts: cmp.Or(cfg.LangGraphMaxAttempts, cfg.Concurrency),
		StopGrace: cfg.ShutdownTimeout, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("LANGGRAPH_CONFIG: %w", err)
	}
	if err := k.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("LANGGRAPH_CONFIG %s: %w", p.Path, err)
	}
	w.Register(langgraph.KindName, k)
	log.Info("graphs_served", "config", p.Path, "graphs", len(p.Graphs), "kind", langgraph.KindName,
		"python", cfg.LangGraphPython, "node", cfg.LangGraphNode)
	return k.Close, k, nil
}

// absIfPath makes a command given as a relative path (it has a slash)
// absolute, against the working directory; a bare name stays for PATH.
func absIfPath(cmd string) string {
	if !strings.ContainsRune(cmd, '/') || filepath.IsAbs(cmd) {
		return cmd
	}
	if abs, err := filepath.Abs(cmd); err == nil {
		return abs
	}
	return cmd
}
