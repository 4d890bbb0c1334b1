// Package agentapi serves LangGraph's Agent Server API (the HTTP API that
// langgraph-sdk, @langchain/langgraph-sdk, RemoteGraph, useStream and
// LangGraph Studio speak) from a baton runner.
//
// It is a view onto package client and package fence: an assistant,
// thread or run of the API is read from and written to baton's store in
// Redis, never kept in this process, so every runner can serve any call
// (a stream's reconnect included) behind a load balancer. A run of the API
// is a baton run of one "graph" node on the API thread's baton thread:
// claimed, leased, fenced and streamed as every baton run is. See
// docs/agent-server.md.
package agentapi
