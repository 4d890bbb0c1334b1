package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

func bufLogger() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&b, nil)), &b
}

func TestJoinAndCarrier(t *testing.T) {
	ctx, ok := Join(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=x")
	require.True(t, ok)
	sc := trace.SpanContextFromContext(ctx)
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", sc.TraceID().String())
	require.True(t, sc.IsRemote())
	require.True(t, sc.IsSampled())

	c := CarrierFrom(ctx)
	require.Equal(t, Carrier("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nvendor=x"), c)
	back, ok := c.Context(context.Background())
	require.True(t, ok)
	require.Equal(t, sc, trace.SpanContextFromContext(back))

	for _, bad := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"} {
		out, ok := Join(ctx, bad, "")
		require.False(t, ok, bad)
		require.Equal(t, sc, trace.SpanContextFromContext(out), "a bad traceparent leaves ctx as it was")
	}
	out, ok := Join(context.Background(), "", "")
	require.True(t, ok, "none is not malformed")
	require.False(t, trace.SpanContextFromContext(out).IsValid())
	require.Empty(t, CarrierFrom(context.Background()))
}
