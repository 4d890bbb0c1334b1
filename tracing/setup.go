package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Setup turns tracing on from the standard OpenTelemetry environment:
// spans are exported over OTLP/HTTP (protobuf, by Exporter) when
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
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return off
	}
	if v := os.Getenv("OTEL_TRACES_EXPORTER"); v != "" && v != "otlp" {
		if v != "none" {
			log.Warn("tracing_off", "reason", fmt.Sprintf("OTEL_TRACES_EXPORTER=%q: baton exports only otlp (or none)", v))
		}
		return off
	}
	name, ep := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if ep == "" {
		name, ep = "OTEL_EXPORTER_OTLP_ENDPOINT", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if ep == "" {
		return off
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		log.Warn("tracing_off", "reason", fmt.Sprintf("%s=%q is not an http:// or https:// URL", name, ep))
		return off
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				log.Warn("tracing_off", "reason", fmt.Sprintf("%s=%q: baton exports OTLP over HTTP only (http/protobuf)", v, p))
				return off
			}
			break
		}
	}
	sampler, err := samplerFromEnv()
	if err != nil {
		log.Warn("tracing_sampler_default", "reason", err.Error(), "sampler", "parentbased_always_on")
	}

	// The SDK's own diagnostics go to the log once, like export errors.
	otel.SetLogger(logr.FromSlogHandler(discardBelowError{log.Handler()}))
	// The SDK reports the sampler variables it reads itself too: they were
	// checked above, once.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))

	traces := ep
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		traces = u.JoinPath("v1", "traces").String() // the base URL's signal path
	}
	cfg, defaulted, err := exporterConfigFromEnv(traces)
	if err != nil {
		log.Warn("tracing_off", "reason", err.Error())
		return off
	}
	for _, d := range defaulted {
		log.Warn("tracing_setting_default", "reason", d)
	}
	exp, err := NewExporter(cfg)
	if err != nil {
		log.Warn("tracing_off", "reason", "OTLP exporter: "+err.Error())
		return off
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the rest of the resource stands.
		log.Warn("tracing_resource_partial", "reason", err.Error())
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sampler),
		sdktrace.WithIDGenerator(IDGenerator()))
	otel.SetErrorHandler(&errorLog{log: log, every: time.Minute})
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	Use(tp)
	log.Info("tracing_on", "endpoint", ep, "resource", res.Set().Encoded(attribute.DefaultEncoder()))
	return func(ctx context.Context) error {
		Use(nil)
		return tp.Shutdown(ctx)
	}
}

// samplerFromEnv reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the
// specification defines them; on a bad value it returns the default with an
// error naming the variable.
func samplerFromEnv() (sdktrace.Sampler, error) {
	def := sdktrace.ParentBased(sdktrace.AlwaysSample())
	name := os.Getenv("OTEL_TRACES_SAMPLER")
	arg, hasArg := os.LookupEnv("OTEL_TRACES_SAMPLER_ARG")
	ratio := 1.0
	if strings.HasSuffix(name, "traceidratio") && hasArg {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return def, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q is not a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	switch name {
	case "", "parentbased_always_on":
		return def, nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return def, fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
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
