package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/batonrun/baton/agentapi"
	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/runner/admin"
	"github.com/batonrun/baton/spec"
)

// The Agent Server API (AGENT_API_ADDR): LangGraph's SDKs' API over the
// project of LANGGRAPH_CONFIG, on a listener of its own, under the admin
// API's token rule.

// agentAPIServer returns the Agent Server API's server and listener, and
// what closes its Redis pool; nil when it is off (no LANGGRAPH_CONFIG, or
// AGENT_API_ADDR=). The API has a Redis pool of its own: its stream
// readers hold connections while they wait, and must never take the
// worker's.
func agentAPIServer(cfg Config, rconf redisconn.Config, limits spec.Limits, graphs agentapi.Graphs, log *slog.Logger) (*http.Server, net.Listener, func(), error) {
	if cfg.LangGraphConfig == "" || cfg.AgentAPIAddr == "" || graphs == nil {
		return nil, nil, func() {}, nil
	}
	rdb, err := rconf.Open()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := client.New(client.Config{Redis: rdb, Prefix: cfg.Prefix, Limits: limits})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, nil, err
	}
	closeAll := func() { _ = c.Close(); _ = rdb.Close() }
	acfg := agentapi.Config{Client: c, Graphs: graphs, Token: cfg.APIToken, Logger: log}
	api, err := agentapi.New(acfg)
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	ln, err := listenAgentAPI(cfg.AgentAPIAddr, cfg.agentAPIAddrDefault, cfg.APIToken != "", log)
	if err != nil {
		closeAll()
		return nil, nil, nil, fmt.Errorf("agent server API: %w", err)
	}
	// Streams and waits last as long as their runs: no write timeout (each
	// stream write has its own deadline); reading a request is bounded.
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	return srv, ln, closeAll, nil
}

// listenAgentAPI listens on addr. A taken default port (2024 is often
// held: `langgraph dev`, or a system service) moves on to a free one, and
// the address is logged; an address the user chose fails when taken,
// naming AGENT_API_ADDR. Without a token the bound address must be
// loopback.
func listenAgentAPI(addr string, isDefault, hasToken bool, log *slog.Logger) (net.Listener, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil {
		addr = net.JoinHostPort(admin.ListenHost(host), port)
	}
	ln, err := net.Listen("tcp", addr)
	switch {
	case err != nil && errors.Is(err, syscall.EADDRINUSE) && !isDefault:
		return nil, fmt.Errorf("AGENT_API_ADDR %s is in use: choose a free port, or set AGENT_API_ADDR= to run without the Agent Server API: %w", addr, err)
	case err != nil && errors.Is(err, syscall.EADDRINUSE):
		host, _, _ := net.SplitHostPort(addr)
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return nil, err
		}
		log.Warn("agent_api_port_taken", "wanted", addr, "addr", ln.Addr().String(), "url", listenURL(ln.Addr()),
			"note", "the default port is in use; point the SDK at url, or set AGENT_API_ADDR")
	case err != nil:
		return nil, err
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !hasToken && (!ok || !tcp.IP.IsLoopback()) {
		_ = ln.Close()
		return nil, fmt.Errorf("AGENT_API_ADDR %s was bound to %s, which is not loopback, and API_TOKEN is empty: "+
			"set API_TOKEN, or listen on 127.0.0.1", addr, ln.Addr())
	}
	return ln, nil
}
