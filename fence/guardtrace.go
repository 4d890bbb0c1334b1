package fence

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// recordAdmit puts a guard's decision on the caller's current span, if one
// is recording: the downstream half of a takeover shows in the run's
// trace as the token refused, with the epoch the guard had seen. It costs
// a context lookup when nothing traces.
func recordAdmit(ctx context.Context, tok Token, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("baton.fencing_token", tok.String()),
		attribute.String("baton.run.id", tok.Run),
		attribute.String("baton.node.id", tok.Node),
		attribute.Int64("baton.epoch", tok.Epoch),
	}
	switch {
	case err == nil:
		span.AddEvent("fence.admitted", trace.WithAttributes(attrs...))
	case errors.Is(err, ErrStaleEpoch), errors.Is(err, ErrNotOwner), errors.Is(err, ErrInvalidID):
		span.AddEvent("fence.refused", trace.WithAttributes(append(attrs, attribute.String("baton.reason", err.Error()))...))
	default:
		span.AddEvent("fence.undecided", trace.WithAttributes(append(attrs, attribute.String("error.type", err.Error()))...))
	}
}
