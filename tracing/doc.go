// Package tracing connects baton to OpenTelemetry. A run is one trace: its
// submit span is the parent of every node attempt's span, on whichever
// runner the attempt ran. The trace context travels with the run (stored
// with the run in Redis, and in each node's queue payload), into exec
// children as TRACEPARENT and TRACESTATE, and into http nodes as the
// traceparent header. A run submitted without a trace gets a root span
// from the first runner that claims a node of it, stored with the run
// likewise.
//
// This package does not import the OpenTelemetry SDK: it holds the trace
// context's handling, the environment's settings (FromEnv) and the OTLP
// exporter (Exporter, fed SpanData). Package tracing/otelsdk sets up the
// SDK for the runner; package tracing/clitrace is the enqueue CLI's own
// small tracer, so that the CLI does not link the SDK.
//
// Tracing is off until otelsdk.Setup or clitrace.Setup (the runner and
// enqueue binaries call them) or Use turns it on; while off, baton's hot path does not touch
// OpenTelemetry at all (one atomic load per node attempt).
package tracing
