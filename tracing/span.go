package tracing

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// SpanData is one ended span as the Exporter encodes it: what the SDK's
// ReadOnlySpan holds (package tracing/otelsdk converts those) and what the
// enqueue CLI's own tracer records (package tracing/clitrace), so that
// neither needs the other.
type SpanData struct {
	// Resource is shared by the spans of one process; spans with the same
	// pointer are sent under one resource.
	Resource *Resource
	Scope    InstrumentationScope

	SpanContext, Parent trace.SpanContext
	Name                string
	Kind                trace.SpanKind
	Start, End          time.Time
	Attributes          []attribute.KeyValue
	DroppedAttributes   int
	Events              []Event
	DroppedEvents       int
	Links               []Link
	DroppedLinks        int
	StatusCode          codes.Code
	StatusDescription   string
}

// Resource is the entity that produced spans: its attributes
// (service.name, ...) and their schema.
type Resource struct {
	Attributes []attribute.KeyValue
	SchemaURL  string
}

// InstrumentationScope is the instrumentation scope that started a span.
type InstrumentationScope struct {
	Name, Version, SchemaURL string
	Attributes               attribute.Set
}

// Event is a span's timed event (an error recorded, ...).
type Event struct {
	Time              time.Time
	Name              string
	Attributes        []attribute.KeyValue
	DroppedAttributes int
}

// Link is a span's link to another span.
type Link struct {
	SpanContext       trace.SpanContext
	Attributes        []attribute.KeyValue
	DroppedAttributes int
}
