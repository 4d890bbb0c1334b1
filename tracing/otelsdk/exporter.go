package otelsdk

import (
	"context"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/batonrun/baton/tracing"
)

// Exporter is tracing.Exporter as the SDK's span exporter, for its batch
// processor.
type Exporter struct{ *tracing.Exporter }

var _ sdktrace.SpanExporter = Exporter{}

// NewExporter checks cfg and returns its exporter.
func NewExporter(cfg tracing.ExporterConfig) (Exporter, error) {
	e, err := tracing.NewExporter(cfg)
	return Exporter{e}, err
}

// ExportSpans sends spans as one request (tracing.Exporter.Export).
func (e Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return e.Export(ctx, SpanData(spans))
}

// SpanData converts the SDK's spans for tracing.Exporter; spans of one
// resource share one *tracing.Resource.
func SpanData(spans []sdktrace.ReadOnlySpan) []tracing.SpanData {
	out := make([]tracing.SpanData, 0, len(spans))
	res := map[*resource.Resource]*tracing.Resource{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		r, ok := res[s.Resource()]
		if !ok {
			if sr := s.Resource(); sr != nil {
				r = &tracing.Resource{Attributes: sr.Attributes(), SchemaURL: sr.SchemaURL()}
			}
			res[s.Resource()] = r
		}
		sc := s.InstrumentationScope()
		d := tracing.SpanData{
			Resource:          r,
			Scope:             tracing.InstrumentationScope{Name: sc.Name, Version: sc.Version, SchemaURL: sc.SchemaURL, Attributes: sc.Attributes},
			SpanContext:       s.SpanContext(),
			Parent:            s.Parent(),
			Name:              s.Name(),
			Kind:              s.SpanKind(),
			Start:             s.StartTime(),
			End:               s.EndTime(),
			Attributes:        s.Attributes(),
			DroppedAttributes: s.DroppedAttributes(),
			DroppedEvents:     s.DroppedEvents(),
			DroppedLinks:      s.DroppedLinks(),
			StatusCode:        s.Status().Code,
			StatusDescription: s.Status().Description,
		}
		for _, e := range s.Events() {
			d.Events = append(d.Events, tracing.Event{Time: e.Time, Name: e.Name, Attributes: e.Attributes, DroppedAttributes: e.DroppedAttributeCount})
		}
		for _, l := range s.Links() {
			d.Links = append(d.Links, tracing.Link{SpanContext: l.SpanContext, Attributes: l.Attributes, DroppedAttributes: l.DroppedAttributeCount})
		}
		out = append(out, d)
	}
	return out
}
