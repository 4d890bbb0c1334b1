package tracing

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The OTLP/HTTP body of a traces export is an ExportTraceServiceRequest
// (opentelemetry/proto/collector/trace/v1): one field, `repeated
// ResourceSpans resource_spans = 1`. TracesData
// (opentelemetry/proto/trace/v1) is the same single field with the same
// number and type, so its encoding is byte for byte a valid export
// request. baton builds TracesData because the collector package's Go
// bindings import gRPC (their gateway and service stubs), which would
// double the binaries' size; otlp_test.go decodes what we send as an
// ExportTraceServiceRequest to hold the claim.

// The span flags' bits 8 and 9 (SpanFlags in trace.proto): whether the
// parent's (or a link's) remoteness is known, and whether it is remote.
const (
	flagHasIsRemote uint32 = 0x100
	flagIsRemote    uint32 = 0x200
)

// toTracesData groups spans by resource and instrumentation scope, in the
// order they first appear, and converts them to OTLP.
func toTracesData(spans []sdktrace.ReadOnlySpan) *tracepb.TracesData {
	type scopeKey struct {
		name, version, schema string
		attrs                 attribute.Distinct
	}
	type group struct {
		rs     *tracepb.ResourceSpans
		scopes map[scopeKey]*tracepb.ScopeSpans
	}
	out := &tracepb.TracesData{}
	byRes := map[*resource.Resource]*group{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		g := byRes[res]
		if g == nil {
			g = &group{rs: &tracepb.ResourceSpans{Resource: toResource(res)}, scopes: map[scopeKey]*tracepb.ScopeSpans{}}
			if res != nil {
				g.rs.SchemaUrl = res.SchemaURL()
			}
			byRes[res] = g
			out.ResourceSpans = append(out.ResourceSpans, g.rs)
		}
		sc := s.InstrumentationScope()
		k := scopeKey{sc.Name, sc.Version, sc.SchemaURL, sc.Attributes.Equivalent()}
		ss := g.scopes[k]
		if ss == nil {
			ss = &tracepb.ScopeSpans{Scope: toScope(sc), SchemaUrl: sc.SchemaURL}
			g.scopes[k] = ss
			g.rs.ScopeSpans = append(g.rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, toSpan(s))
	}
	return out
}

func toResource(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return &resourcepb.Resource{}
	}
	return &resourcepb.Resource{Attributes: toKeyValues(r.Attributes())}
}

func toScope(s instrumentation.Scope) *commonpb.InstrumentationScope {
	return &commonpb.InstrumentationScope{Name: s.Name, Version: s.Version, Attributes: toKeyValues(s.Attributes.ToSlice())}
}

func toSpan(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	out := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Flags:                  uint32(sc.TraceFlags()) | flagHasIsRemote,
		Name:                   s.Name(),
		Kind:                   toKind(s.SpanKind()),
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             toKeyValues(s.Attributes()),
		DroppedAttributesCount: count(s.DroppedAttributes()),
		DroppedEventsCount:     count(s.DroppedEvents()),
		DroppedLinksCount:      count(s.DroppedLinks()),
		Status:                 toStatus(s.Status()),
	}
	if parent.SpanID().IsValid() {
		pid := parent.SpanID()
		out.ParentSpanId = pid[:]
		if parent.IsRemote() {
			out.Flags |= flagIsRemote
		}
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{
			TimeUnixNano:           unixNano(e.Time),
			Name:                   e.Name,
			Attributes:             toKeyValues(e.Attributes),
			DroppedAttributesCount: count(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		lt, ls := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		flags := uint32(l.SpanContext.TraceFlags()) | flagHasIsRemote
		if l.SpanContext.IsRemote() {
			flags |= flagIsRemote
		}
		out.Links = append(out.Links, &tracepb.Span_Link{
			TraceId:                lt[:],
			SpanId:                 ls[:],
			TraceState:             l.SpanContext.TraceState().String(),
			Attributes:             toKeyValues(l.Attributes),
			DroppedAttributesCount: count(l.DroppedAttributeCount),
			Flags:                  flags,
		})
	}
	return out
}

func toKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

// toStatus maps the Go API's codes (Unset 0, Error 1, Ok 2) to OTLP's
// (UNSET 0, OK 1, ERROR 2); the description belongs to an error only.
func toStatus(s sdktrace.Status) *tracepb.Status {
	switch s.Code {
	case codes.Error:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: s.Description}
	case codes.Ok:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return &tracepb.Status{}
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

func count(n int) uint32 {
	if n < 0 {
		return 0
	}
	return uint32(min(n, math.MaxUint32))
}

func toKeyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: toAnyValue(kv.Value)})
	}
	return out
}

func toAnyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		return array(v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: toKeyValues(v.AsMap())}}}
	}
	return &commonpb.AnyValue{} // EMPTY: a value that is not set
}

func array[T any](xs []T, val func(T) attribute.Value) *commonpb.AnyValue {
	vals := make([]*commonpb.AnyValue, len(xs))
	for i, x := range xs {
		vals[i] = toAnyValue(val(x))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
}
