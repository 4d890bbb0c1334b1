package clitrace

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/batonrun/baton/tracing"
)

// collect starts a collector and returns its URL and what it received.
func collect(t *testing.T) (string, func() []*collectortrace.ExportTraceServiceRequest) {
	var mu sync.Mutex
	var got []*collectortrace.ExportTraceServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []*collectortrace.ExportTraceServiceRequest {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// submit sets the environment, makes one span as enqueue submit does
// (a child of parent when it is valid) and exits; it returns the log and
// the spans the collector received.
func submit(t *testing.T, env map[string]string, parent trace.SpanContext) (string, []*tracepb.ResourceSpans, trace.SpanContext) {
	url, got := collect(t)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(k, env[k])
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	stop := Setup(context.Background(), "baton-enqueue", log)
	ctx := context.Background()
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	_, span := tracing.Tracer().Start(ctx, "submit r1", trace.WithSpanKind(trace.SpanKindProducer))
	sc := span.SpanContext()
	span.End()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = stop(sctx)
	require.False(t, tracing.Enabled(), "shutdown turns tracing off")
	var rs []*tracepb.ResourceSpans
	for _, r := range got() {
		rs = append(rs, r.GetResourceSpans()...)
	}
	return buf.String(), rs, sc
}

func parentCtx(sampled bool) trace.SpanContext {
	var f trace.TraceFlags
	if sampled {
		f = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, TraceFlags: f, Remote: true})
}

// The sampler the environment names decides whether the submit span
// reaches the collector, as the SDK's would: parent-based samplers follow
// the caller's traceparent, the others ignore it; an unsampled span still
// carries the trace on, unsampled.
func TestSamplerFromTheEnvironment(t *testing.T) {
	// A trace id whose lower 63 bits are past half: out of a 0.5 ratio.
	for _, tc := range []struct {
		sampler, arg string
		parent       trace.SpanContext
		sent         bool
	}{
		{"", "", trace.SpanContext{}, true},
		{"", "", parentCtx(false), false},
		{"", "", parentCtx(true), true},
		{"always_on", "", parentCtx(false), true},
		{"always_off", "", parentCtx(true), false},
		{"parentbased_always_off", "", trace.SpanContext{}, false},
		{"parentbased_always_off", "", parentCtx(true), true},
		{"traceidratio", "0", parentCtx(true), false},
		{"traceidratio", "1", parentCtx(false), true},
		{"parentbased_traceidratio", "0", trace.SpanContext{}, false},
		{"parentbased_traceidratio", "0", parentCtx(true), true},
	} {
		env := map[string]string{"OTEL_TRACES_SAMPLER": tc.sampler}
		if tc.arg != "" {
			env["OTEL_TRACES_SAMPLER_ARG"] = tc.arg
		}
		log, rs, sc := submit(t, env, tc.parent)
		require.NotContains(t, log, "level=WARN")
		require.True(t, sc.IsValid(), "%v: the span carries the trace on", tc)
		require.Equal(t, tc.sent, sc.IsSampled(), "%v", tc)
		if tc.parent.IsValid() {
			require.Equal(t, tc.parent.TraceID(), sc.TraceID(), "%v", tc)
		}
		if !tc.sent {
			require.Empty(t, rs, "%v", tc)
			continue
		}
		require.Len(t, rs, 1, "%v", tc)
		sp := rs[0].GetScopeSpans()[0].GetSpans()[0]
		require.Equal(t, "submit r1", sp.GetName())
		require.Equal(t, tracepb.Span_SPAN_KIND_PRODUCER, sp.GetKind())
		if tc.parent.IsValid() {
			pid := tc.parent.SpanID()
			require.Equal(t, pid[:], sp.GetParentSpanId(), "%v", tc)
		}
	}
}

// traceidratio keeps about its ratio of traces.
func TestTraceIDRatioSamplesItsShare(t *testing.T) {
	kept := 0
	for range 2000 {
		if sample(tracing.Sampler{Name: "traceidratio", Ratio: 0.25}, trace.SpanContext{}, randomTraceID()) {
			kept++
		}
	}
	require.InDelta(t, 500, kept, 100)
}

// A bad sampler is one warning and the default, parentbased_always_on.
func TestBadSamplerWarnsAndDefaults(t *testing.T) {
	log, rs, _ := submit(t, map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, parentCtx(false))
	require.Contains(t, log, `OTEL_TRACES_SAMPLER=\"sometimes\"`)
	require.Empty(t, rs, "parent-based: an unsampled caller's trace is not sampled")
	log, rs, _ = submit(t, map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, trace.SpanContext{})
	require.Contains(t, log, `OTEL_TRACES_SAMPLER_ARG=\"2\"`)
	require.Len(t, rs, 1)
}

func resourceAttrs(rs *tracepb.ResourceSpans) map[string]string {
	m := map[string]string{}
	for _, kv := range rs.GetResource().GetAttributes() {
		m[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return m
}

// The resource is service.name baton-enqueue unless OTEL_SERVICE_NAME
// says otherwise, with OTEL_RESOURCE_ATTRIBUTES' pairs; a malformed entry
// is one warning and the rest stands.
func TestResourceFromTheEnvironment(t *testing.T) {
	log, rs, _ := submit(t, nil, trace.SpanContext{})
	require.NotContains(t, log, "level=WARN")
	require.Len(t, rs, 1)
	require.Equal(t, "baton-enqueue", resourceAttrs(rs[0])["service.name"])

	log, rs, _ = submit(t, map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "service.name=attr,deployment.environment=prod%20eu, team = q"}, trace.SpanContext{})
	require.NotContains(t, log, "level=WARN")
	a := resourceAttrs(rs[0])
	require.Equal(t, "attr", a["service.name"])
	require.Equal(t, "prod eu", a["deployment.environment"])
	require.Equal(t, "q", a["team"])

	log, rs, _ = submit(t, map[string]string{"OTEL_SERVICE_NAME": "svc", "OTEL_RESOURCE_ATTRIBUTES": "service.name=attr,broken,k=v"}, trace.SpanContext{})
	require.Contains(t, log, "tracing_resource_partial")
	require.Contains(t, log, "broken")
	a = resourceAttrs(rs[0])
	require.Equal(t, "svc", a["service.name"], "OTEL_SERVICE_NAME wins")
	require.Equal(t, "v", a["k"])
}

// With tracing switched off by the environment, nothing is set up.
func TestDisabledStaysOff(t *testing.T) {
	for _, env := range []map[string]string{{"OTEL_SDK_DISABLED": "true"}, {"OTEL_TRACES_EXPORTER": "none"}} {
		log, rs, sc := submit(t, env, trace.SpanContext{})
		require.Empty(t, log)
		require.Empty(t, rs)
		require.False(t, sc.IsValid())
	}
}

// An unreachable collector delays the exit by the shutdown's deadline at
// most, with one warning.
func TestUnreachableCollectorIsBounded(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	var buf bytes.Buffer
	stop := Setup(context.Background(), "baton-enqueue", slog.New(slog.NewTextHandler(&buf, nil)))
	_, span := tracing.Tracer().Start(context.Background(), "submit r1")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.Error(t, stop(ctx))
	require.Less(t, time.Since(start), 2*time.Second)
	require.Contains(t, buf.String(), "tracing_export_failed")
}
