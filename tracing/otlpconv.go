package tracing

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/batonrun/baton/internal/pbwire"
)

// The OTLP/HTTP body of a traces export is an ExportTraceServiceRequest
// (opentelemetry/proto/collector/trace/v1): one field, `repeated
// ResourceSpans resource_spans = 1`. TracesData
// (opentelemetry/proto/trace/v1) is the same single field with the same
// number and type. baton writes that message with protowire alone, from
// the field numbers of the OTLP protos (opentelemetry-proto v1: trace,
// common and resource), not with their generated Go bindings: those link
// the reflection-based protobuf runtime (1.5 MB of the enqueue binary),
// and the collector package's bindings import gRPC too.
// otlp_test.go decodes what we send with the real protos, as an
// ExportTraceServiceRequest, to hold the claim field by field.

// The span flags' bits 8 and 9 (SpanFlags in trace.proto): whether the
// parent's (or a link's) remoteness is known, and whether it is remote.
const (
	flagHasIsRemote uint32 = 0x100
	flagIsRemote    uint32 = 0x200
)

// Field numbers, by message, of the OTLP protos.
const (
	// TracesData / ExportTraceServiceRequest
	tdResourceSpans protowire.Number = 1
	// ResourceSpans
	rsResource   protowire.Number = 1
	rsScopeSpans protowire.Number = 2
	rsSchemaURL  protowire.Number = 3
	// Resource
	resAttributes protowire.Number = 1
	// ScopeSpans
	ssScope     protowire.Number = 1
	ssSpans     protowire.Number = 2
	ssSchemaURL protowire.Number = 3
	// InstrumentationScope
	scName       protowire.Number = 1
	scVersion    protowire.Number = 2
	scAttributes protowire.Number = 3
	// Span
	spTraceID           protowire.Number = 1
	spSpanID            protowire.Number = 2
	spTraceState        protowire.Number = 3
	spParentSpanID      protowire.Number = 4
	spName              protowire.Number = 5
	spKind              protowire.Number = 6
	spStart             protowire.Number = 7
	spEnd               protowire.Number = 8
	spAttributes        protowire.Number = 9
	spDroppedAttributes protowire.Number = 10
	spEvents            protowire.Number = 11
	spDroppedEvents     protowire.Number = 12
	spLinks             protowire.Number = 13
	spDroppedLinks      protowire.Number = 14
	spStatus            protowire.Number = 15
	spFlags             protowire.Number = 16
	// Span.Event
	evTime              protowire.Number = 1
	evName              protowire.Number = 2
	evAttributes        protowire.Number = 3
	evDroppedAttributes protowire.Number = 4
	// Span.Link
	lkTraceID           protowire.Number = 1
	lkSpanID            protowire.Number = 2
	lkTraceState        protowire.Number = 3
	lkAttributes        protowire.Number = 4
	lkDroppedAttributes protowire.Number = 5
	lkFlags             protowire.Number = 6
	// Status
	stMessage protowire.Number = 2
	stCode    protowire.Number = 3
	// KeyValue, KeyValueList, ArrayValue
	kvKey    protowire.Number = 1
	kvValue  protowire.Number = 2
	kvValues protowire.Number = 1 // KeyValueList.values and ArrayValue.values
	// AnyValue, a oneof: the field set is sent even when its value is zero
	avString protowire.Number = 1
	avBool   protowire.Number = 2
	avInt    protowire.Number = 3
	avDouble protowire.Number = 4
	avArray  protowire.Number = 5
	avKVList protowire.Number = 6
	avBytes  protowire.Number = 7
)

// The enums' OTLP values: Span.SpanKind and Status.StatusCode.
const (
	kindInternal uint64 = 1
	kindServer   uint64 = 2
	kindClient   uint64 = 3
	kindProducer uint64 = 4
	kindConsumer uint64 = 5

	statusOK    uint64 = 1
	statusError uint64 = 2
)

// encodeTraces groups spans by resource and instrumentation scope, in the
// order they first appear, and encodes them as an OTLP TracesData.
func encodeTraces(spans []SpanData) []byte {
	type scopeKey struct {
		name, version, schema string
		attrs                 attribute.Distinct
	}
	type scopeGroup struct {
		scope InstrumentationScope
		spans []*SpanData
	}
	type resGroup struct {
		res    *Resource
		scopes []*scopeGroup
		byKey  map[scopeKey]*scopeGroup
	}
	var groups []*resGroup
	byRes := map[*Resource]*resGroup{}
	for i := range spans {
		s := &spans[i]
		res := s.Resource
		g := byRes[res]
		if g == nil {
			g = &resGroup{res: res, byKey: map[scopeKey]*scopeGroup{}}
			byRes[res] = g
			groups = append(groups, g)
		}
		sc := s.Scope
		k := scopeKey{sc.Name, sc.Version, sc.SchemaURL, sc.Attributes.Equivalent()}
		sg := g.byKey[k]
		if sg == nil {
			sg = &scopeGroup{scope: sc}
			g.byKey[k] = sg
			g.scopes = append(g.scopes, sg)
		}
		sg.spans = append(sg.spans, s)
	}

	var b []byte
	for _, g := range groups {
		var rs, r int
		b, rs = pbwire.Begin(b, tdResourceSpans)
		b, r = pbwire.Begin(b, rsResource) // present even when empty, as before
		if g.res != nil {
			b = appendKeyValues(b, resAttributes, g.res.Attributes)
		}
		b = pbwire.End(b, r)
		for _, sg := range g.scopes {
			var ss, sc int
			b, ss = pbwire.Begin(b, rsScopeSpans)
			b, sc = pbwire.Begin(b, ssScope)
			b = pbwire.String(b, scName, sg.scope.Name)
			b = pbwire.String(b, scVersion, sg.scope.Version)
			b = appendKeyValues(b, scAttributes, sg.scope.Attributes.ToSlice())
			b = pbwire.End(b, sc)
			for _, s := range sg.spans {
				b = appendSpan(b, s)
			}
			b = pbwire.String(b, ssSchemaURL, sg.scope.SchemaURL)
			b = pbwire.End(b, ss)
		}
		if g.res != nil {
			b = pbwire.String(b, rsSchemaURL, g.res.SchemaURL)
		}
		b = pbwire.End(b, rs)
	}
	return b
}

func appendSpan(b []byte, s *SpanData) []byte {
	sc, parent := s.SpanContext, s.Parent
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := uint32(sc.TraceFlags()) | flagHasIsRemote
	b, sp := pbwire.Begin(b, ssSpans)
	b = pbwire.Bytes(b, spTraceID, tid[:])
	b = pbwire.Bytes(b, spSpanID, sid[:])
	b = pbwire.String(b, spTraceState, sc.TraceState().String())
	if parent.SpanID().IsValid() {
		pid := parent.SpanID()
		b = pbwire.Bytes(b, spParentSpanID, pid[:])
		if parent.IsRemote() {
			flags |= flagIsRemote
		}
	}
	b = pbwire.String(b, spName, s.Name)
	b = pbwire.Varint(b, spKind, kind(s.Kind))
	b = pbwire.Fixed64(b, spStart, unixNano(s.Start))
	b = pbwire.Fixed64(b, spEnd, unixNano(s.End))
	b = appendKeyValues(b, spAttributes, s.Attributes)
	b = pbwire.Varint(b, spDroppedAttributes, count(s.DroppedAttributes))
	for _, e := range s.Events {
		var ev int
		b, ev = pbwire.Begin(b, spEvents)
		b = pbwire.Fixed64(b, evTime, unixNano(e.Time))
		b = pbwire.String(b, evName, e.Name)
		b = appendKeyValues(b, evAttributes, e.Attributes)
		b = pbwire.Varint(b, evDroppedAttributes, count(e.DroppedAttributes))
		b = pbwire.End(b, ev)
	}
	b = pbwire.Varint(b, spDroppedEvents, count(s.DroppedEvents))
	for _, l := range s.Links {
		lt, ls := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		lflags := uint32(l.SpanContext.TraceFlags()) | flagHasIsRemote
		if l.SpanContext.IsRemote() {
			lflags |= flagIsRemote
		}
		var lk int
		b, lk = pbwire.Begin(b, spLinks)
		b = pbwire.Bytes(b, lkTraceID, lt[:])
		b = pbwire.Bytes(b, lkSpanID, ls[:])
		b = pbwire.String(b, lkTraceState, l.SpanContext.TraceState().String())
		b = appendKeyValues(b, lkAttributes, l.Attributes)
		b = pbwire.Varint(b, lkDroppedAttributes, count(l.DroppedAttributes))
		b = pbwire.Fixed32(b, lkFlags, lflags)
		b = pbwire.End(b, lk)
	}
	b = pbwire.Varint(b, spDroppedLinks, count(s.DroppedLinks))
	b = appendStatus(b, s.StatusCode, s.StatusDescription)
	b = pbwire.Fixed32(b, spFlags, flags)
	return pbwire.End(b, sp)
}

func kind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal:
		return kindInternal
	case trace.SpanKindServer:
		return kindServer
	case trace.SpanKindClient:
		return kindClient
	case trace.SpanKindProducer:
		return kindProducer
	case trace.SpanKindConsumer:
		return kindConsumer
	}
	return 0 // SPAN_KIND_UNSPECIFIED
}

// appendStatus maps the Go API's codes (Unset 0, Error 1, Ok 2) to OTLP's
// (UNSET 0, OK 1, ERROR 2); the description belongs to an error only. The
// status is sent even when unset.
func appendStatus(b []byte, code codes.Code, desc string) []byte {
	b, st := pbwire.Begin(b, spStatus)
	switch code {
	case codes.Error:
		b = pbwire.String(b, stMessage, desc)
		b = pbwire.Varint(b, stCode, statusError)
	case codes.Ok:
		b = pbwire.Varint(b, stCode, statusOK)
	}
	return pbwire.End(b, st)
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

func count(n int) uint64 {
	return uint64(min(max(n, 0), math.MaxUint32))
}

func appendKeyValues(b []byte, num protowire.Number, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		var at int
		b, at = pbwire.Begin(b, num)
		b = pbwire.String(b, kvKey, string(kv.Key))
		b = appendAnyValue(b, kvValue, kv.Value)
		b = pbwire.End(b, at)
	}
	return b
}

// appendAnyValue appends v as the AnyValue field num; a value of no type
// is an AnyValue with nothing set (EMPTY).
func appendAnyValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, av := pbwire.Begin(b, num)
	switch v.Type() {
	case attribute.BOOL:
		b = protowire.AppendTag(b, avBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = protowire.AppendTag(b, avInt, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		b = protowire.AppendTag(b, avDouble, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = protowire.AppendTag(b, avString, protowire.BytesType)
		b = protowire.AppendString(b, v.AsString())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, avBytes, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE:
		b = appendArray(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		b = appendArray(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		b = appendArray(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		b = appendArray(b, v.AsStringSlice(), attribute.StringValue)
	case attribute.SLICE:
		b = appendArray(b, v.AsSlice(), func(v attribute.Value) attribute.Value { return v })
	case attribute.MAP:
		var kl int
		b, kl = pbwire.Begin(b, avKVList)
		b = appendKeyValues(b, kvValues, v.AsMap())
		b = pbwire.End(b, kl)
	}
	return pbwire.End(b, av)
}

// appendArray appends an AnyValue's array_value holding xs.
func appendArray[T any](b []byte, xs []T, val func(T) attribute.Value) []byte {
	b, arr := pbwire.Begin(b, avArray)
	for _, x := range xs {
		b = appendAnyValue(b, kvValues, val(x))
	}
	return pbwire.End(b, arr)
}
