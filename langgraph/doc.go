// Package langgraph runs the graphs of a LangGraph project on baton: a
// runner started with LANGGRAPH_CONFIG reads the project's langgraph.json
// (Load) and serves its graphs as the node kind "graph" (Kind), in a warm
// worker process that runs many attempts at once.
//
// The runner keeps ownership: it claims each node, renews its lease,
// commits, parks or fails it, and cancels it. The worker only runs the
// graph, with baton's fenced checkpointer holding the attempt's lease, so a
// write from an attempt whose claim is gone is refused by the store. The
// protocol between them is in docs/graph-workers.md.
//
// Kind also answers what only the graph knows outside any run (Call: a
// thread's state and history, the graph's schemas and drawing) from the
// same worker with a read-only saver: what the Agent Server API needs of
// a project, with IDs.
//
// This package starts Python; it imports nothing of it, and the core
// packages do not import this one.
package langgraph
