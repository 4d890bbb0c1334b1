// Package otelsdk turns baton's tracing on through the OpenTelemetry SDK
// (its tracer provider, samplers and batch processor) with baton's OTLP
// exporter: the runner's tracing. The enqueue CLI, which makes one span
// and exits, uses package tracing/clitrace instead and does not link the
// SDK; both read the environment with tracing.FromEnv.
package otelsdk

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonrun/baton/tracing"
)

// Setup turns tracing on from the standard OpenTelemetry environment:
// spans are exported over OTLP/HTTP (protobuf, by tracing.Exporter) when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// with OTEL_SERVICE_NAME (default service), OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, and the exporter's own
// OTEL_EXPORTER_OTLP_(TRACES_)* settings (headers, timeout, compression,
// certificate, client certificate and key). With none set, or OTEL_SDK_DISABLED=true, or
// OTEL_TRACES_EXPORTER=none, tracing stays off.
//
// Bad settings never stop the program: a malformed value is logged once, as
// a warning naming the variable, and tracing stays off (a bad endpoint,
// protocol, headers or certificate) or takes the default (a bad sampler,
// timeout or compression). An unreachable
// collector is logged once a minute at most; spans that cannot be sent are
// dropped, never waited for.
//
// The returned function flushes and stops the exporter; call it before
// exiting, with a deadline.
func Setup(ctx context.Context, service string, log *slog.Logger) (shutdown func(context.Context) error) {
	off := func(context.Context) error { return nil }
	s, ok := tracing.FromEnv(service, log)
	if !ok {
		return off
	}
	// The SDK's own diagnostics go to the log once, like export errors.
	otel.SetLogger(logr.FromSlogHandler(discardBelowError{log.Handler()}))
	// The SDK reports the sampler variables it reads itself too: they were
	// checked by FromEnv, once.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))

	exp, err := NewExporter(s.Exporter)
	if err != nil {
		log.Warn("tracing_off", "reason", "OTLP exporter: "+err.Error())
		return off
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(s.Resource...))
	if err != nil {
		log.Warn("tracing_resource_partial", "reason", err.Error())
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(Sampler(s.Sampler)),
		sdktrace.WithIDGenerator(tracing.IDGenerator()))
	otel.SetErrorHandler(&errorLog{log: log, every: time.Minute})
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	tracing.Use(tp)
	log.Info("tracing_on", "endpoint", s.Endpoint, "resource", res.Set().Encoded(attribute.DefaultEncoder()))
	return func(ctx context.Context) error {
		tracing.Use(nil)
		return tp.Shutdown(ctx)
	}
}

// Sampler returns the SDK's sampler for s.
func Sampler(s tracing.Sampler) sdktrace.Sampler {
	switch s.Name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(s.Ratio)
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.Ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// errorLog logs OpenTelemetry's errors (a collector that does not answer,
// spans dropped) as one warning, then at most one per interval with the
// count of those it held back.
type errorLog struct {
	log   *slog.Logger
	every time.Duration

	mu     sync.Mutex
	last   time.Time
	held   int
	logged bool
}

func (e *errorLog) Handle(err error) {
	e.mu.Lock()
	now := time.Now()
	if e.logged && now.Sub(e.last) < e.every {
		e.held++
		e.mu.Unlock()
		return
	}
	held := e.held
	e.logged, e.last, e.held = true, now, 0
	e.mu.Unlock()
	e.log.Warn("tracing_export_failed", "err", err, "more_since_last", held, "next_report_after", e.every)
}

// discardBelowError passes the SDK's error-level logs on and drops its
// chatter.
type discardBelowError struct{ slog.Handler }

func (d discardBelowError) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
