package otelsdk

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/batonrun/baton/tracing"
)

func bufLogger() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

// Without an OTLP endpoint nothing is set up and nothing is logged.
func TestSetupWithoutEndpointStaysOff(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	log, buf := bufLogger()
	stop := Setup(context.Background(), "test", log)
	require.False(t, tracing.Enabled())
	require.NoError(t, stop(context.Background()))
	require.Empty(t, buf.String())
}

// A malformed setting is one warning that names the variable; the
// program runs on, with tracing off or the setting's default.
func TestSetupBadSettingsWarnOnceAndRunOn(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		on      bool
		warning string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, false, `OTEL_EXPORTER_OTLP_ENDPOINT=\"collector:4318\" is not an http:// or https:// URL`},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://%zz"}, false, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "baton exports OTLP over HTTP only"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "zipkin"}, false, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": "sometimes"}, true, `OTEL_TRACES_SAMPLER=\"sometimes\"`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "ten"}, true, `OTEL_TRACES_SAMPLER_ARG=\"ten\"`},
	} {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
			"OTEL_TRACES_EXPORTER", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
			t.Setenv(k, tc.env[k])
		}
		log, buf := bufLogger()
		stop := Setup(context.Background(), "test", log)
		require.Equal(t, tc.on, tracing.Enabled(), "%v", tc.env)
		warnings := strings.Count(buf.String(), "level=WARN")
		require.Equal(t, 1, warnings, "%v: %s", tc.env, buf.String())
		require.Contains(t, buf.String(), tc.warning)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = stop(ctx) // nothing listens on port 1: the flush may fail
		cancel()
		require.False(t, tracing.Enabled())
	}
}

// An unreachable collector's errors are one warning, then at most one per
// interval.
func TestExportErrorsAreLoggedOncePerInterval(t *testing.T) {
	log, buf := bufLogger()
	h := &errorLog{log: log, every: time.Hour}
	for range 5 {
		h.Handle(errors.New("connection refused"))
	}
	require.Equal(t, 1, strings.Count(buf.String(), "tracing_export_failed"), buf.String())
}
