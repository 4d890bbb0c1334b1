package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/batonrun/baton/agentapi"
	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/langgraph"
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
	if _, legacy := graphs.(projectGraphs); legacy {
		// A graph kind that answers no worker calls predates the API's
		// node input fields and refuses them: send it the ones it reads.
		acfg.GraphInputFields = legacyGraphInputFields
	}
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

// legacyGraphInputFields are the graph node input fields of a graph kind
// that answers no worker calls.
var legacyGraphInputFields = []string{"graph", "input", "command", "config", "stream_mode"}

// projectGraphs is the API's view of the project when the graph kind does
// not answer worker calls itself: its graph ids, and no state, history,
// schemas or drawings.
type projectGraphs struct{ ids []string }

func (g projectGraphs) IDs() []string { return g.ids }

func (g projectGraphs) Call(_ context.Context, op string, _ any) (json.RawMessage, error) {
	return nil, fmt.Errorf("agent server API: the graph worker does not answer %q in this build", op)
}

// graphsOf is the project's graphs as the API asks for them: the kind
// itself when it answers worker calls (agentapi.Graphs), else its ids.
func graphsOf(p *langgraph.Project, k *langgraph.Kind) agentapi.Graphs {
	if g, ok := any(k).(agentapi.Graphs); ok {
		return g
	}
	return projectGraphs{ids: slices.Sorted(maps.Keys(p.Graphs))}
}
