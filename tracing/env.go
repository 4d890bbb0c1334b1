package tracing

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
)

// Settings is what the standard OpenTelemetry environment asks of a
// program's tracing, read by FromEnv: the runner's SDK (package
// tracing/otelsdk) and the enqueue CLI's tracer (package tracing/clitrace)
// both start from it, so they honour the same variables the same way.
type Settings struct {
	// Endpoint is the variable's value as given, for the log.
	Endpoint string
	Exporter ExporterConfig
	Sampler  Sampler
	// Resource is service.name (the program's default, then
	// OTEL_SERVICE_NAME) and OTEL_RESOURCE_ATTRIBUTES.
	Resource []attribute.KeyValue
}

// Sampler is OTEL_TRACES_SAMPLER and its ratio: Name is one of
// always_on, always_off, traceidratio, parentbased_always_on,
// parentbased_always_off, parentbased_traceidratio.
type Sampler struct {
	Name  string
	Ratio float64
}

// FromEnv reads the OTEL_* variables (see tracing/otelsdk.Setup for which).
// ok is false when tracing stays off: none set, OTEL_SDK_DISABLED=true,
// OTEL_TRACES_EXPORTER=none, or a setting that cannot be honoured safely.
// Every bad setting is logged once, as a warning naming the variable; one
// with a safe default (sampler, timeout, compression, resource) takes it.
func FromEnv(service string, log *slog.Logger) (s Settings, ok bool) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return s, false
	}
	if v := os.Getenv("OTEL_TRACES_EXPORTER"); v != "" && v != "otlp" {
		if v != "none" {
			log.Warn("tracing_off", "reason", fmt.Sprintf("OTEL_TRACES_EXPORTER=%q: baton exports only otlp (or none)", v))
		}
		return s, false
	}
	name, ep := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if ep == "" {
		name, ep = "OTEL_EXPORTER_OTLP_ENDPOINT", os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if ep == "" {
		return s, false
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		log.Warn("tracing_off", "reason", fmt.Sprintf("%s=%q is not an http:// or https:// URL", name, ep))
		return s, false
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				log.Warn("tracing_off", "reason", fmt.Sprintf("%s=%q: baton exports OTLP over HTTP only (http/protobuf)", v, p))
				return s, false
			}
			break
		}
	}
	s.Sampler, err = samplerFromEnv()
	if err != nil {
		log.Warn("tracing_sampler_default", "reason", err.Error(), "sampler", "parentbased_always_on")
	}
	traces := ep
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		traces = u.JoinPath("v1", "traces").String() // the base URL's signal path
	}
	cfg, defaulted, err := exporterConfigFromEnv(traces)
	if err != nil {
		log.Warn("tracing_off", "reason", err.Error())
		return s, false
	}
	for _, d := range defaulted {
		log.Warn("tracing_setting_default", "reason", d)
	}
	s.Endpoint, s.Exporter = ep, cfg
	s.Resource, err = resourceFromEnv(service)
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: the rest of the resource stands.
		log.Warn("tracing_resource_partial", "reason", err.Error())
	}
	return s, true
}

// samplerFromEnv reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the
// specification defines them; on a bad value it returns the default with an
// error naming the variable.
func samplerFromEnv() (Sampler, error) {
	def := Sampler{Name: "parentbased_always_on", Ratio: 1}
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
	case "":
		return def, nil
	case "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio":
		return Sampler{Name: name, Ratio: ratio}, nil
	}
	return def, fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}

// resourceFromEnv returns service.name (service, or OTEL_SERVICE_NAME)
// and OTEL_RESOURCE_ATTRIBUTES' key=value pairs, values percent-decoded,
// as the SDK reads them: an entry without = is left out, and named in the
// error; a value that does not decode is kept as written.
func resourceFromEnv(service string) ([]attribute.KeyValue, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	var invalid []string
	if v := os.Getenv("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		for _, p := range strings.Split(v, ",") {
			k, val, found := strings.Cut(p, "=")
			if !found {
				invalid = append(invalid, p)
				continue
			}
			dec, err := url.PathUnescape(strings.TrimSpace(val))
			if err != nil {
				dec = val
			}
			attrs = append(attrs, attribute.String(strings.TrimSpace(k), dec))
		}
	}
	if v := strings.TrimSpace(os.Getenv("OTEL_SERVICE_NAME")); v != "" {
		attrs = append(attrs, attribute.String("service.name", v))
	}
	// Later entries win, as in a merged resource.
	set := attribute.NewSet(attrs...)
	var err error
	if len(invalid) > 0 {
		err = fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: missing value: %v", invalid)
	}
	return set.ToSlice(), err
}
