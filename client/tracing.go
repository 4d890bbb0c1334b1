package client

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonrun/baton/internal/delivery"
	"github.com/batonrun/baton/tracing"
)

// startSubmit starts a run's submit span, a child of ctx's span (the
// submitter's trace, or a traceparent it passed: tracing.Join), and
// returns ctx carrying the run's trace context for the submit to store
// and its deliveries to carry. While tracing is off it starts no span,
// and the run joins ctx's span, if it has one: a submitter that traces
// on its own still gets the runners' spans in its trace.
func startSubmit(ctx context.Context, run, thread string) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		if trace.SpanContextFromContext(ctx).IsValid() {
			return delivery.WithRunTrace(ctx, tracing.CarrierFrom(ctx)), nil
		}
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "baton"),
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "submit"),
		attribute.String("baton.run.id", run),
	}
	if thread != "" {
		attrs = append(attrs, attribute.String("baton.thread.id", thread))
	}
	ctx, span := tracing.Tracer().Start(ctx, "submit "+run, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	return delivery.WithRunTrace(ctx, tracing.CarrierFrom(ctx)), span
}

// endSubmit ends a submit span (nil: tracing was off) with its outcome.
func endSubmit(span trace.Span, status string, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("baton.run.status", status))
	}
	span.End()
}
