package fence_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batonrun/baton/fence"
)

// A downstream that traces sees, on the span of the request, the token the
// guard admitted and the stale one it refused, with their epochs.
func TestGuardHTTPRecordsTheTokenOnTheSpan(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracer := tp.Tracer("downstream")
	guarded := fence.GuardHTTP(fence.NewMemoryGuard(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
	// The downstream's own instrumentation: a span per request.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracer.Start(r.Context(), "POST /pay")
		defer span.End()
		guarded.ServeHTTP(w, r.WithContext(ctx))
	})
	send := func(tok fence.Token) int {
		req := httptest.NewRequest(http.MethodPost, "/pay", nil)
		req.Header.Set(fence.HeaderFencingToken, tok.String())
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	newer := fence.Token{Run: "r", Node: "n", Epoch: 2, ClaimID: "c2"}
	stale := fence.Token{Run: "r", Node: "n", Epoch: 1, ClaimID: "c1"}
	require.Equal(t, http.StatusOK, send(newer))
	require.Equal(t, http.StatusConflict, send(stale))

	spans := rec.Ended()
	require.Len(t, spans, 2)
	want := []struct {
		event, token string
		epoch        int64
	}{{"fence.admitted", newer.String(), 2}, {"fence.refused", stale.String(), 1}}
	for i, s := range spans {
		require.Len(t, s.Events(), 1, "one decision per request")
		e := s.Events()[0]
		require.Equal(t, want[i].event, e.Name)
		attrs := map[string]any{}
		for _, kv := range e.Attributes {
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		require.Equal(t, want[i].token, attrs["baton.fencing_token"])
		require.Equal(t, want[i].epoch, attrs["baton.epoch"])
	}
	require.NoError(t, tp.Shutdown(context.Background()))
}
