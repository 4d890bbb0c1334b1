package tracing

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// A large batch, interleaving two resources and three scopes, with values
// whose lengths take one to three bytes to write, decodes with the OTLP
// protos into the groups it was sent in, each span whole and in order.
func TestEncodeTracesGroupsALargeBatch(t *testing.T) {
	t.Parallel()
	resA := &Resource{Attributes: []attribute.KeyValue{attribute.String("service.name", "a")}}
	resB := &Resource{Attributes: []attribute.KeyValue{attribute.String("service.name", strings.Repeat("b", 200))}}
	scopes := []InstrumentationScope{{Name: "s0"}, {Name: "s1", Version: "v1"}, {Name: "s2"}}
	var spans []SpanData
	for i := range 600 {
		res := resA
		if i%2 == 1 {
			res = resB
		}
		spans = append(spans, SpanData{
			Name: fmt.Sprintf("span-%d", i),
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1, byte(i >> 8), byte(i)}, SpanID: trace.SpanID{2, byte(i >> 8), byte(i)}}),
			Attributes: []attribute.KeyValue{attribute.String("v", strings.Repeat("x", i*40)), attribute.Int("i", i)},
			Resource:   res,
			Scope:      scopes[i%3],
		})
	}
	b := encodeTraces(spans)
	got := &collectortrace.ExportTraceServiceRequest{}
	require.NoError(t, proto.Unmarshal(b, got))
	require.Empty(t, got.ProtoReflect().GetUnknown())

	require.Len(t, got.ResourceSpans, 2)
	seen := 0
	for r, rs := range got.ResourceSpans {
		require.Equal(t, []string{"a", strings.Repeat("b", 200)}[r], rs.Resource.Attributes[0].Value.GetStringValue())
		require.Len(t, rs.ScopeSpans, 3)
		for _, ss := range rs.ScopeSpans {
			require.Len(t, ss.Spans, 100)
			last := -1
			for _, sp := range ss.Spans {
				var i int
				_, err := fmt.Sscanf(sp.Name, "span-%d", &i)
				require.NoError(t, err)
				require.Greater(t, i, last, "spans keep their order")
				last = i
				require.Equal(t, r, i%2, "span %d under its resource", i)
				require.Equal(t, scopes[i%3].Name, ss.Scope.Name, "span %d under its scope", i)
				require.Equal(t, scopes[i%3].Version, ss.Scope.Version)
				require.Equal(t, []byte{2, byte(i >> 8), byte(i), 0, 0, 0, 0, 0}, sp.SpanId)
				require.Len(t, sp.Attributes, 2)
				require.Equal(t, i*40, len(sp.Attributes[0].Value.GetStringValue()))
				require.Equal(t, int64(i), sp.Attributes[1].Value.GetIntValue())
				seen++
			}
		}
	}
	require.Equal(t, 600, seen)
}
