package runner_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/tracing"
)

// The events of an attempt's life are on its span: a checkpoint saved and
// a park, then on the next attempt the resume; a cancel on a cancelled
// attempt; each span with its outcome. Not parallel: the tracer provider
// is the process's.
func TestAttemptSpansRecordCheckpointParkResumeAndCancel(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	b := setup(t)
	ctx := context.Background()

	asks := runner.KindFunc(func(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
		if v, ok := t.ResumeValue(); ok {
			return v, nil
		}
		if _, err := t.SaveCheckpoint(ctx, "state", map[string]int{"step": 1}); err != nil {
			return nil, err
		}
		return nil, runner.Park(runner.Wait{Request: json.RawMessage(`{"ask":"ok?"}`)})
	})
	blocks := runner.KindFunc(func(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"ask": asks, "block": blocks})

	b.submit(`{"id":"asking","nodes":[{"id":"a","kind":"ask"}]}`)
	b.waitState("asking", "a", "WAITING")
	_, err := b.client.Resume(ctx, "asking", "a", "", json.RawMessage(`"yes"`))
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", b.waitRun("asking", 10*time.Second).Status)

	b.submit(`{"id":"stopping","nodes":[{"id":"s","kind":"block"}]}`)
	b.waitState("stopping", "s", "RUNNING")
	b.cancel("stopping")
	require.Equal(t, "CANCELLED", b.waitRun("stopping", 10*time.Second).Status)

	spans := func(run string) (submit sdktrace.ReadOnlySpan, nodes []sdktrace.ReadOnlySpan) {
		for _, s := range rec.Ended() {
			for _, a := range s.Attributes() {
				if a.Key == "baton.run.id" && a.Value.AsString() == run {
					if s.Name() == "submit "+run {
						submit = s
					} else {
						nodes = append(nodes, s)
					}
				}
			}
		}
		return submit, nodes
	}
	events := func(s sdktrace.ReadOnlySpan) []string {
		var out []string
		for _, e := range s.Events() {
			out = append(out, e.Name)
		}
		return out
	}
	attr := func(s sdktrace.ReadOnlySpan, key string) string {
		for _, a := range s.Attributes() {
			if string(a.Key) == key {
				return a.Value.Emit()
			}
		}
		return ""
	}

	var nodes []sdktrace.ReadOnlySpan
	var submit sdktrace.ReadOnlySpan
	waitFor(t, 5*time.Second, "both attempts' spans", func() bool {
		submit, nodes = spans("asking")
		return submit != nil && len(nodes) == 2
	})
	parked, resumed := nodes[0], nodes[1]
	for _, s := range nodes {
		require.Equal(t, submit.SpanContext().TraceID(), s.SpanContext().TraceID())
		require.Equal(t, submit.SpanContext().SpanID(), s.Parent().SpanID())
	}
	require.Equal(t, []string{"checkpoint", "park"}, events(parked))
	require.Equal(t, "parked", attr(parked, "baton.outcome"))
	require.Equal(t, []string{"resume"}, events(resumed))
	require.Equal(t, "committed", attr(resumed, "baton.outcome"))

	waitFor(t, 5*time.Second, "the cancelled attempt's span", func() bool {
		_, nodes = spans("stopping")
		return len(nodes) == 1
	})
	require.Contains(t, events(nodes[0]), "cancel")
	require.Equal(t, "cancelled", attr(nodes[0], "baton.outcome"))
}

// An attempt's span id is the one tracing.AttemptSpanID derives from its
// epoch (what the takeover links rely on), and a span the handler starts
// under it gets an id of its own, as its child. Not parallel: the tracer
// provider is the process's.
func TestAttemptSpanIDIsDerivedAndChildrenGetTheirOwn(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(tracing.IDGenerator()))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	b := setup(t)

	work := runner.KindFunc(func(ctx context.Context, _ *runner.Task) (json.RawMessage, error) {
		_, sp := tracing.Tracer().Start(ctx, "inner")
		sp.End()
		return json.RawMessage(`{}`), nil
	})
	b.worker(b.fastConfig("w1"), map[string]runner.Kind{"work": work})
	b.submit(`{"id":"derived","nodes":[{"id":"n","kind":"work"}]}`)
	require.Equal(t, "SUCCEEDED", b.waitRun("derived", 10*time.Second).Status)

	var node, inner sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "node n":
			node = s
		case "inner":
			inner = s
		}
	}
	require.NotNil(t, node)
	require.NotNil(t, inner)
	sc := node.SpanContext()
	require.Equal(t, tracing.AttemptSpanID(sc.TraceID(), "derived", "n", 1), sc.SpanID())
	require.Equal(t, sc.SpanID(), inner.Parent().SpanID())
	require.NotEqual(t, sc.SpanID(), inner.SpanContext().SpanID())
}
