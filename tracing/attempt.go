package tracing

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// A node attempt's span id is derived from its trace, run, node and epoch
// (the fencing token, raised by exactly one at each claim), so that an
// attempt and the one that takes its node over can link to each other's
// spans without storing span ids anywhere: the successor of the attempt
// at epoch e is the attempt at e+1. Setup's tracer provider derives them
// (IDGenerator); a program that builds its own provider passes
// sdktrace.WithIDGenerator(tracing.IDGenerator()) to get the links.

type attemptKey struct {
	run, node string
	epoch     int64
}

// WithAttempt returns ctx naming the node attempt whose span is started
// from it, for IDGenerator.
func WithAttempt(ctx context.Context, run, node string, epoch int64) context.Context {
	return context.WithValue(ctx, attemptKey{}, attemptKey{run, node, epoch})
}

// AttemptSpanID is the span id IDGenerator gives the attempt of node at
// epoch, in run, in trace tid.
func AttemptSpanID(tid trace.TraceID, run, node string, epoch int64) trace.SpanID {
	h := fnv.New64a()
	_, _ = h.Write(tid[:])
	_, _ = h.Write([]byte(run))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(node))
	_, _ = h.Write([]byte{0})
	_ = binary.Write(h, binary.BigEndian, epoch)
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], h.Sum64()|1) // never the invalid all-zero id
	return sid
}

// AttemptLink links span, the attempt of node at epoch, to the attempt
// of the same node at other (its predecessor or successor), when span's
// id was derived by IDGenerator (else the link would point nowhere). It
// reports whether it linked.
func AttemptLink(span trace.Span, run, node string, epoch, other int64, reason string) bool {
	sc := span.SpanContext()
	if !sc.IsValid() || sc.SpanID() != AttemptSpanID(sc.TraceID(), run, node, epoch) {
		return false
	}
	to := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    sc.TraceID(),
		SpanID:     AttemptSpanID(sc.TraceID(), run, node, other),
		TraceFlags: sc.TraceFlags(),
		TraceState: sc.TraceState(),
	})
	span.AddLink(trace.Link{SpanContext: to, Attributes: linkAttrs(reason, other)})
	return true
}

// IDGenerator returns the generator of span and trace ids that derives a
// node attempt's span id (WithAttempt, AttemptSpanID) and draws every
// other id at random.
// It is an sdktrace.IDGenerator (this package does not import the SDK).
func IDGenerator() IDs { return idGenerator{} }

// IDs draws trace and span ids: IDGenerator's result.
type IDs interface {
	NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID)
	NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID
}

type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, idGenerator{}.NewSpanID(ctx, tid)
}

func (idGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if a, ok := ctx.Value(attemptKey{}).(attemptKey); ok {
		return AttemptSpanID(tid, a.run, a.node, a.epoch)
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

func linkAttrs(reason string, epoch int64) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("baton.link", reason), attribute.Int64("baton.epoch", epoch)}
}
