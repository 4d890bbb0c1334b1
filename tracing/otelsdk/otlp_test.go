package otelsdk

import (
	"compress/gzip"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/batonrun/baton/tracing"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// collector is a real OTLP/HTTP endpoint: it decodes each request as the
// collector's ExportTraceServiceRequest (not the TracesData we encode),
// and answers with the replies queued in answer, then 200.
type collector struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []*http.Request
	bodies   []*collectortrace.ExportTraceServiceRequest
	answer   []func(http.ResponseWriter)
}

func newCollector(t *testing.T, tlsServer bool) *collector {
	c := &collector{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		msg := &collectortrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, msg); err != nil {
			t.Errorf("collector: undecodable export: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.requests = append(c.requests, r)
		c.bodies = append(c.bodies, msg)
		var reply func(http.ResponseWriter)
		if len(c.answer) > 0 {
			reply, c.answer = c.answer[0], c.answer[1:]
		}
		c.mu.Unlock()
		if reply != nil {
			reply(w)
			return
		}
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	if tlsServer {
		c.srv = httptest.NewTLSServer(h)
	} else {
		c.srv = httptest.NewServer(h)
	}
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) got() ([]*http.Request, []*collectortrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*http.Request(nil), c.requests...), append([]*collectortrace.ExportTraceServiceRequest(nil), c.bodies...)
}

func status(code int, retryAfter string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
	}
}

func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func arr(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

// Every field of a span reaches the collector as OTLP defines it:
// resource and scope (with their schema URLs and attributes), ids, trace
// state and flags (the parent's remoteness), kind, times, attributes of
// every type, events, links, status and the dropped counts.
func TestExporterSendsEveryFieldOfASpan(t *testing.T) {
	t.Parallel()
	c := newCollector(t, false)
	exp, err := NewExporter(tracing.ExporterConfig{URL: c.srv.URL + "/v1/traces"})
	require.NoError(t, err)

	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "svc"), attribute.Int("pid", 7))
	scope := instrumentation.Scope{Name: tracing.Scope, Version: "v1.2.3", SchemaURL: "https://example/schema", Attributes: attribute.NewSet(attribute.Bool("lib", true))}
	ts, err := trace.ParseTraceState("vendor=x,other=y")
	require.NoError(t, err)
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid := trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	pid := trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}
	lid := trace.SpanID{8, 7, 6, 5, 4, 3, 2, 1}
	ltid := trace.TraceID{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	start := time.Unix(1_700_000_000, 123_456_789)
	end := start.Add(1500 * time.Millisecond)

	full := tracetest.SpanStub{
		Name:        "node n",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts}),
		Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: pid, TraceFlags: trace.FlagsSampled, Remote: true}),
		SpanKind:    trace.SpanKindConsumer,
		StartTime:   start,
		EndTime:     end,
		Attributes: []attribute.KeyValue{
			attribute.Bool("b", true),
			attribute.Int64("i", -42),
			attribute.Float64("f", 2.5),
			attribute.String("s", "text"),
			attribute.BoolSlice("bs", []bool{true, false}),
			attribute.Int64Slice("is", []int64{1, 2}),
			attribute.Float64Slice("fs", []float64{0.5}),
			attribute.StringSlice("ss", []string{"a", "b"}),
			{Key: "bytes", Value: attribute.ByteSliceValue([]byte{0, 1, 2})},
			{Key: "slice", Value: attribute.SliceValue(attribute.StringValue("x"), attribute.IntValue(3))},
			{Key: "map", Value: attribute.MapValue(attribute.String("k", "v"), attribute.Bool("ok", false))},
			{Key: "empty", Value: attribute.Value{}},
		},
		Events: []sdktrace.Event{
			{Name: "takeover", Attributes: []attribute.KeyValue{attribute.Int("baton.epoch", 2)}, DroppedAttributeCount: 1, Time: start.Add(time.Millisecond)},
		},
		Links: []sdktrace.Link{
			{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: ltid, SpanID: lid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true}),
				Attributes: []attribute.KeyValue{attribute.String("why", "superseded")}, DroppedAttributeCount: 3},
		},
		Status:                 sdktrace.Status{Code: codes.Error, Description: "stale"},
		DroppedAttributes:      4,
		DroppedEvents:          5,
		DroppedLinks:           6,
		Resource:               res,
		InstrumentationScope:   scope,
		InstrumentationLibrary: scope,
	}
	// A root span of the same resource and scope, status OK and an
	// unspecified kind; a third under another scope.
	root := full
	root.Name, root.Parent, root.SpanKind, root.Status = "root", trace.SpanContext{}, trace.SpanKindUnspecified, sdktrace.Status{Code: codes.Ok, Description: "ignored"}
	root.Attributes, root.Events, root.Links, root.DroppedAttributes, root.DroppedEvents, root.DroppedLinks = nil, nil, nil, 0, 0, 0
	other := root
	other.Name, other.InstrumentationScope = "other", instrumentation.Scope{Name: "other"}
	other.InstrumentationLibrary = other.InstrumentationScope
	other.SpanKind, other.Status = trace.SpanKindClient, sdktrace.Status{}

	require.NoError(t, exp.ExportSpans(context.Background(), tracetest.SpanStubs{full, root, other}.Snapshots()))

	reqs, bodies := c.got()
	require.Len(t, reqs, 1)
	require.Equal(t, http.MethodPost, reqs[0].Method)
	require.Equal(t, "/v1/traces", reqs[0].URL.Path)
	require.Equal(t, "application/x-protobuf", reqs[0].Header.Get("Content-Type"))

	rootSpan := &tracepb.Span{
		TraceId: tid[:], SpanId: sid[:], TraceState: "vendor=x,other=y", Flags: 0x101, Name: "root",
		StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(end.UnixNano()),
		Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
	}
	otherSpan := proto.Clone(rootSpan).(*tracepb.Span)
	otherSpan.Name, otherSpan.Kind, otherSpan.Status = "other", tracepb.Span_SPAN_KIND_CLIENT, &tracepb.Status{}
	want := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "pid", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 7}}},
			{Key: "service.name", Value: str("svc")},
		}},
		SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: tracing.Scope, Version: "v1.2.3", Attributes: []*commonpb.KeyValue{
				{Key: "lib", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
			}},
			SchemaUrl: "https://example/schema",
			Spans: []*tracepb.Span{{
				TraceId: tid[:], SpanId: sid[:], TraceState: "vendor=x,other=y", ParentSpanId: pid[:],
				Flags: 0x01 | 0x100 | 0x200, // sampled; the parent is known to be remote
				Name:  "node n", Kind: tracepb.Span_SPAN_KIND_CONSUMER,
				StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(end.UnixNano()),
				Attributes: []*commonpb.KeyValue{
					{Key: "b", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
					{Key: "i", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -42}}},
					{Key: "f", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 2.5}}},
					{Key: "s", Value: str("text")},
					{Key: "bs", Value: arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}, &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: false}})},
					{Key: "is", Value: arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1}}, &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 2}})},
					{Key: "fs", Value: arr(&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.5}})},
					{Key: "ss", Value: arr(str("a"), str("b"))},
					{Key: "bytes", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 2}}}},
					{Key: "slice", Value: arr(str("x"), &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 3}})},
					{Key: "map", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{
						{Key: "k", Value: str("v")},
						{Key: "ok", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: false}}},
					}}}}},
					{Key: "empty", Value: &commonpb.AnyValue{}},
				},
				DroppedAttributesCount: 4,
				Events: []*tracepb.Span_Event{{
					TimeUnixNano: uint64(start.Add(time.Millisecond).UnixNano()), Name: "takeover",
					Attributes:             []*commonpb.KeyValue{{Key: "baton.epoch", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 2}}}},
					DroppedAttributesCount: 1,
				}},
				DroppedEventsCount: 5,
				Links: []*tracepb.Span_Link{{
					TraceId: ltid[:], SpanId: lid[:], TraceState: "vendor=x,other=y",
					Attributes:             []*commonpb.KeyValue{{Key: "why", Value: str("superseded")}},
					DroppedAttributesCount: 3, Flags: 0x301,
				}},
				DroppedLinksCount: 6,
				Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "stale"},
			}, rootSpan}},
			{Scope: &commonpb.InstrumentationScope{Name: "other"}, Spans: []*tracepb.Span{otherSpan}},
		},
	}}}
	require.True(t, proto.Equal(want, bodies[0]), "got:\n%s\nwant:\n%s", prototext.Format(bodies[0]), prototext.Format(want))
}

// A collector that asks for the batch again (429, 503) gets it again,
// after its Retry-After or a backoff; the headers and gzip go with every
// try.
func TestExporterRetriesWhatTheCollectorAsksFor(t *testing.T) {
	t.Parallel()
	c := newCollector(t, false)
	c.answer = []func(http.ResponseWriter){status(http.StatusServiceUnavailable, "0"), status(http.StatusTooManyRequests, ""), status(http.StatusBadGateway, "")}
	exp, err := NewExporter(tracing.ExporterConfig{URL: c.srv.URL + "/v1/traces", Gzip: true, Headers: map[string]string{"Api-Key": "secret"}, Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.NoError(t, exp.ExportSpans(context.Background(), tracetest.SpanStubs{{Name: "a"}}.Snapshots()))
	reqs, bodies := c.got()
	require.Len(t, reqs, 4, "three refusals, then accepted")
	for i, r := range reqs {
		require.Equal(t, "secret", r.Header.Get("Api-Key"))
		require.Equal(t, "gzip", r.Header.Get("Content-Encoding"))
		require.Equal(t, "a", bodies[i].GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0].GetName())
	}
}

// Retries stop at the timeout: a collector that says "come back in a
// minute" to an exporter with a 200 ms timeout gets one try, and the
// export returns at once with the collector's answer.
func TestExporterRetriesAreBoundedByTheTimeout(t *testing.T) {
	t.Parallel()
	c := newCollector(t, false)
	for range 50 {
		c.answer = append(c.answer, status(http.StatusServiceUnavailable, "60"))
	}
	exp, err := NewExporter(tracing.ExporterConfig{URL: c.srv.URL + "/v1/traces", Timeout: 200 * time.Millisecond})
	require.NoError(t, err)
	begin := time.Now()
	err = exp.ExportSpans(context.Background(), tracetest.SpanStubs{{Name: "a"}}.Snapshots())
	require.ErrorContains(t, err, "503")
	require.Less(t, time.Since(begin), 2*time.Second)
	reqs, _ := c.got()
	require.Len(t, reqs, 1)

	// Backoff without Retry-After: several tries, all within the timeout.
	c2 := newCollector(t, false)
	for range 200 {
		c2.answer = append(c2.answer, status(http.StatusGatewayTimeout, ""))
	}
	exp2, err := NewExporter(tracing.ExporterConfig{URL: c2.srv.URL + "/v1/traces", Timeout: 700 * time.Millisecond})
	require.NoError(t, err)
	begin = time.Now()
	require.ErrorContains(t, exp2.ExportSpans(context.Background(), tracetest.SpanStubs{{Name: "a"}}.Snapshots()), "504")
	require.Less(t, time.Since(begin), 3*time.Second)
	reqs, _ = c2.got()
	require.GreaterOrEqual(t, len(reqs), 2)
}

// A refusal that is not transient, a partial success and a collector
// that is not there are errors at once, never retried.
func TestExporterReportsFailuresItDoesNotRetry(t *testing.T) {
	t.Parallel()
	c := newCollector(t, false)
	rpcStatus := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "span name too long")
	var partial []byte
	partial = protowire.AppendTag(partial, 1, protowire.VarintType)
	partial = protowire.AppendVarint(partial, 2)
	partial = protowire.AppendTag(partial, 2, protowire.BytesType)
	partial = protowire.AppendString(partial, "two spans had no name")
	resp := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), partial)
	c.answer = []func(http.ResponseWriter){
		func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest); _, _ = w.Write(rpcStatus) },
		func(w http.ResponseWriter) { _, _ = w.Write(resp) },
	}
	exp, err := NewExporter(tracing.ExporterConfig{URL: c.srv.URL + "/v1/traces"})
	require.NoError(t, err)
	spans := tracetest.SpanStubs{{Name: "a"}}.Snapshots()
	require.ErrorContains(t, exp.ExportSpans(context.Background(), spans), "HTTP 400 Bad Request: span name too long")
	require.ErrorContains(t, exp.ExportSpans(context.Background(), spans), "rejected 2 spans: two spans had no name")
	reqs, _ := c.got()
	require.Len(t, reqs, 2)

	c.srv.Close()
	begin := time.Now()
	require.Error(t, exp.ExportSpans(context.Background(), spans))
	require.Less(t, time.Since(begin), 2*time.Second)

	require.NoError(t, exp.Shutdown(context.Background()))
	require.NoError(t, exp.ExportSpans(context.Background(), spans), "after shutdown, spans are dropped")

	_, err = NewExporter(tracing.ExporterConfig{URL: "collector:4318"})
	require.ErrorContains(t, err, `URL "collector:4318"`)
}

func setenv(t *testing.T, env map[string]string) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_SDK_DISABLED",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, env[k])
	}
}

// Setup reads the OTLP settings a user sets: the base endpoint gets
// /v1/traces under its path, the traces-specific headers win, gzip is
// used, https is verified against the CA file, and the service name and
// resource attributes reach the collector.
func TestSetupExportsWithTheEnvironmentsSettings(t *testing.T) {
	c := newCollector(t, true)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw}), 0o600))
	setenv(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":       c.srv.URL + "/otlp/",
		"OTEL_EXPORTER_OTLP_HEADERS":        "api-key=general,x-other=1",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "api-key=tr%20aces , x-tenant=t1",
		"OTEL_EXPORTER_OTLP_COMPRESSION":    "gzip",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "5000",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":    ca,
		"OTEL_SERVICE_NAME":                 "from-env",
		"OTEL_RESOURCE_ATTRIBUTES":          "deployment.environment=test",
	})
	log, buf := bufLogger()
	stop := Setup(context.Background(), "baton-test", log)
	require.True(t, tracing.Enabled(), buf.String())
	require.NotContains(t, buf.String(), "level=WARN")
	_, sp := tracing.Tracer().Start(context.Background(), "work")
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, stop(ctx))

	reqs, bodies := c.got()
	require.Len(t, reqs, 1)
	require.Equal(t, "/otlp/v1/traces", reqs[0].URL.Path)
	require.Equal(t, "tr aces", reqs[0].Header.Get("Api-Key"))
	require.Equal(t, "t1", reqs[0].Header.Get("X-Tenant"))
	require.Empty(t, reqs[0].Header.Get("X-Other"), "the traces headers replace the general ones")
	require.Equal(t, "gzip", reqs[0].Header.Get("Content-Encoding"))
	rs := bodies[0].GetResourceSpans()[0]
	attrs := map[string]string{}
	for _, kv := range rs.GetResource().GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	require.Equal(t, "from-env", attrs["service.name"])
	require.Equal(t, "test", attrs["deployment.environment"])
	require.Equal(t, "work", rs.GetScopeSpans()[0].GetSpans()[0].GetName())
	require.Equal(t, tracing.Scope, rs.GetScopeSpans()[0].GetScope().GetName())
}

// A bad exporter setting is one warning naming the variable, never the
// value of a header (it may be a secret); tracing stays off when the
// setting cannot be honoured safely, and takes the default otherwise.
func TestSetupBadExporterSettingsWarnOnce(t *testing.T) {
	ep := "http://127.0.0.1:1"
	for _, tc := range []struct {
		env     map[string]string
		on      bool
		warning string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=s3cret,novalue"}, false, "OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not key=value"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "/nonexistent/ca.pem"}, false, "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"},
		{map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/x.pem"}, false, "without OTEL_EXPORTER_OTLP_CLIENT_KEY"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, true, `OTEL_EXPORTER_OTLP_TIMEOUT=\"10s\" is not a whole number of milliseconds`},
		{map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, true, `OTEL_EXPORTER_OTLP_COMPRESSION=\"zstd\" is not gzip or none`},
	} {
		tc.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = ep
		setenv(t, tc.env)
		log, buf := bufLogger()
		stop := Setup(context.Background(), "test", log)
		require.Equal(t, tc.on, tracing.Enabled(), "%v", tc.env)
		require.Equal(t, 1, strings.Count(buf.String(), "level=WARN"), "%v: %s", tc.env, buf.String())
		require.Contains(t, buf.String(), tc.warning)
		require.NotContains(t, buf.String(), "s3cret")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = stop(ctx)
		cancel()
	}
}

func ExampleNewExporter() {
	exp, err := NewExporter(tracing.ExporterConfig{URL: "http://otel-collector:4318/v1/traces", Gzip: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	tracing.Use(tp)
	defer func() {
		tracing.Use(nil)
		_ = tp.Shutdown(context.Background())
	}()
	fmt.Println(tracing.Enabled())
	// Output: true
}
