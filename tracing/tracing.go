package tracing

import (
	"context"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of baton's spans.
const Scope = "github.com/batonrun/baton"

var tracer atomic.Pointer[trace.Tracer] // nil: tracing is off

// Use makes baton trace through tp, for a program that embeds baton and
// sets up OpenTelemetry itself; nil turns tracing off.
func Use(tp trace.TracerProvider) {
	if tp == nil {
		tracer.Store(nil)
		return
	}
	t := tp.Tracer(Scope)
	tracer.Store(&t)
}

// Enabled reports whether baton traces.
func Enabled() bool { return tracer.Load() != nil }

// Tracer returns baton's tracer, a no-op one while tracing is off.
func Tracer() trace.Tracer {
	if t := tracer.Load(); t != nil {
		return *t
	}
	return noopTracer
}

var noopTracer = noop.NewTracerProvider().Tracer(Scope)

var w3c = propagation.TraceContext{}

// Carrier is a run's trace context as baton stores it with the run and in
// its node payloads: the W3C traceparent, then, when there is one, a
// newline and the tracestate.
type Carrier string

// CarrierFrom returns the carrier of ctx's span context ("" when ctx
// holds no valid one).
func CarrierFrom(ctx context.Context) Carrier {
	tp, ts := Headers(ctx)
	if tp == "" {
		return ""
	}
	if ts != "" {
		return Carrier(tp + "\n" + ts)
	}
	return Carrier(tp)
}

// Context returns ctx with c's span context as its remote parent, and
// false when c is not empty and not a valid traceparent.
func (c Carrier) Context(ctx context.Context) (context.Context, bool) {
	if c == "" {
		return ctx, true
	}
	tp, ts, _ := strings.Cut(string(c), "\n")
	return Join(ctx, tp, ts)
}

// Headers returns the W3C traceparent and tracestate of ctx's span
// context, "" when it has none.
func Headers(ctx context.Context) (traceparent, tracestate string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	h := propagation.MapCarrier{}
	w3c.Inject(ctx, h)
	return h["traceparent"], h["tracestate"]
}

// Join returns ctx with the span context that traceparent and tracestate
// name as its remote parent: the trace a submitter passed. An empty
// traceparent returns ctx unchanged; a malformed one too, with false.
func Join(ctx context.Context, traceparent, tracestate string) (context.Context, bool) {
	if traceparent == "" {
		return ctx, true
	}
	h := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		h["tracestate"] = tracestate
	}
	sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), h))
	if !sc.IsValid() {
		return ctx, false
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc), true
}

// Inject sets the traceparent (and tracestate) headers of ctx's span on
// h, an http.Header or any other carrier.
func Inject(ctx context.Context, h propagation.TextMapCarrier) { w3c.Inject(ctx, h) }

// Extract returns ctx with the span context of h's traceparent as remote
// parent, and false when h has a traceparent that is malformed.
func Extract(ctx context.Context, h propagation.TextMapCarrier) (context.Context, bool) {
	return Join(ctx, h.Get("traceparent"), h.Get("tracestate"))
}
