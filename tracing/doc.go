// Package tracing connects baton to OpenTelemetry. A run is one trace: its
// submit span is the parent of every node attempt's span, on whichever
// runner the attempt ran. The trace context travels with the run (stored
// with the run in Redis, and in each node's queue payload), into exec
// children as TRACEPARENT and TRACESTATE, and into http nodes as the
// traceparent header. A run submitted without a trace gets a root span
// from the first runner that claims a node of it, stored with the run
// likewise.
//
// Tracing is off until Setup (the runner and enqueue binaries call it)
// or Use turns it on; while off, baton's hot path does not touch
// OpenTelemetry at all (one atomic load per node attempt).
package tracing
