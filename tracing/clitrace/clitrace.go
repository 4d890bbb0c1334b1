// Package clitrace is the enqueue CLI's tracer: an implementation of the
// OpenTelemetry trace API that records the few spans a command makes (one
// submit span) and sends them, as it exits, through tracing.Exporter. It
// honours the same OTEL_* variables as the runner's SDK (tracing.FromEnv)
// without linking the SDK, whose code and package initialisation made up
// a megabyte of the binary and part of every call's start-up.
package clitrace

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/batonrun/baton/tracing"
)

// Setup turns tracing on from the standard OpenTelemetry environment, as
// tracing/otelsdk.Setup does for the runner (the same variables, defaults
// and warnings), with service as the default service.name. The returned
// function sends the spans ended so far and stops; its ctx bounds the
// send, so an unreachable collector delays the exit by that deadline at
// most, and the spans are dropped with one warning.
func Setup(ctx context.Context, service string, log *slog.Logger) (shutdown func(context.Context) error) {
	s, ok := tracing.FromEnv(service, log)
	if !ok {
		return func(context.Context) error { return nil }
	}
	exp, err := tracing.NewExporter(s.Exporter)
	if err != nil {
		log.Warn("tracing_off", "reason", "OTLP exporter: "+err.Error())
		return func(context.Context) error { return nil }
	}
	res := &tracing.Resource{Attributes: append([]attribute.KeyValue{
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.name", "baton-clitrace"),
	}, s.Resource...)}
	set := attribute.NewSet(res.Attributes...) // later entries win
	res.Attributes = set.ToSlice()
	tp := &Provider{sampler: s.Sampler, res: res}
	tracing.Use(tp)
	log.Info("tracing_on", "endpoint", s.Endpoint, "resource", set.Encoded(attribute.DefaultEncoder()))
	return func(ctx context.Context) error {
		tracing.Use(nil)
		spans := tp.take()
		defer exp.Shutdown(ctx)
		if err := exp.Export(ctx, spans); err != nil {
			log.Warn("tracing_export_failed", "err", err, "spans_dropped", len(spans))
			return err
		}
		return nil
	}
}

// Provider is a trace.TracerProvider that keeps the spans its tracers
// end, for Setup's shutdown to send.
type Provider struct {
	embedded.TracerProvider
	sampler tracing.Sampler
	res     *tracing.Resource

	mu    sync.Mutex
	ended []tracing.SpanData
}

func (p *Provider) take() []tracing.SpanData {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.ended
	p.ended = nil
	return s
}

// Tracer returns the tracer of an instrumentation scope.
func (p *Provider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	c := trace.NewTracerConfig(opts...)
	return &tracer{p: p, scope: tracing.InstrumentationScope{Name: name, Version: c.InstrumentationVersion(),
		SchemaURL: c.SchemaURL(), Attributes: c.InstrumentationAttributes()}}
}

type tracer struct {
	embedded.Tracer
	p     *Provider
	scope tracing.InstrumentationScope
}

// Start starts a span, a child of ctx's span (remote or not), sampled as
// the sampler says; an unsampled span records nothing but carries its
// context on, unsampled, as the SDK's does.
func (t *tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	c := trace.NewSpanStartConfig(opts...)
	parent := trace.SpanContextFromContext(ctx)
	if c.NewRoot() {
		parent = trace.SpanContext{}
	}
	tid := parent.TraceID()
	if !parent.IsValid() {
		tid = randomTraceID()
	}
	sampled := sample(t.p.sampler, parent, tid)
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: randomSpanID(), TraceFlags: flags, TraceState: parent.TraceState()})
	if !sampled {
		n := nonRecording{sc: sc}
		return trace.ContextWithSpan(ctx, n), n
	}
	start := c.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	s := &span{p: t.p, d: tracing.SpanData{Resource: t.p.res, Scope: t.scope, SpanContext: sc, Parent: parent, Name: name,
		Kind: c.SpanKind(), Start: start, Attributes: c.Attributes()}}
	for _, l := range c.Links() {
		s.d.Links = append(s.d.Links, tracing.Link{SpanContext: l.SpanContext, Attributes: l.Attributes})
	}
	return trace.ContextWithSpan(ctx, s), s
}

// sample decides as the OTEL_TRACES_SAMPLER named does.
func sample(s tracing.Sampler, parent trace.SpanContext, tid trace.TraceID) bool {
	name := s.Name
	if len(name) > len("parentbased_") && name[:len("parentbased_")] == "parentbased_" {
		if parent.IsValid() {
			return parent.IsSampled()
		}
		name = name[len("parentbased_"):]
	}
	switch name {
	case "always_on":
		return true
	case "always_off":
		return false
	case "traceidratio":
		// The SDK's TraceIDRatioBased: the trace id's lower 63 bits
		// against the ratio, so every process decides a trace alike.
		if s.Ratio >= 1 {
			return true
		}
		bound := uint64(s.Ratio * (1 << 63))
		return binary.BigEndian.Uint64(tid[8:16])>>1 < bound
	}
	return true
}

func randomTraceID() trace.TraceID {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// span is a recording span; End hands it to the provider once.
type span struct {
	embedded.Span
	p *Provider

	mu    sync.Mutex
	d     tracing.SpanData
	ended bool
}

func (s *span) End(opts ...trace.SpanEndOption) {
	c := trace.NewSpanEndConfig(opts...)
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	s.d.End = c.Timestamp()
	if s.d.End.IsZero() {
		s.d.End = time.Now()
	}
	set := attribute.NewSet(s.d.Attributes...) // a key set twice: the last value
	s.d.Attributes = set.ToSlice()
	d := s.d
	s.mu.Unlock()
	s.p.mu.Lock()
	s.p.ended = append(s.p.ended, d)
	s.p.mu.Unlock()
}

func (s *span) AddEvent(name string, opts ...trace.EventOption) {
	c := trace.NewEventConfig(opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		t := c.Timestamp()
		if t.IsZero() {
			t = time.Now()
		}
		s.d.Events = append(s.d.Events, tracing.Event{Time: t, Name: name, Attributes: c.Attributes()})
	}
}

func (s *span) AddLink(l trace.Link) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.d.Links = append(s.d.Links, tracing.Link{SpanContext: l.SpanContext, Attributes: l.Attributes})
	}
}

func (s *span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// RecordError adds an "exception" event, as the SDK does.
func (s *span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	opts = append(opts, trace.WithAttributes(
		attribute.String("exception.type", typeName(err)),
		attribute.String("exception.message", err.Error())))
	s.AddEvent("exception", opts...)
}

func (s *span) SpanContext() trace.SpanContext { return s.d.SpanContext }

// SetStatus sets the status as the SDK does: Ok is final, an Error's
// description is kept, Unset changes nothing.
func (s *span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || code == codes.Unset || s.d.StatusCode == codes.Ok {
		return
	}
	s.d.StatusCode = code
	s.d.StatusDescription = ""
	if code == codes.Error {
		s.d.StatusDescription = description
	}
}

func (s *span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.d.Name = name
	}
}

func (s *span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.d.Attributes = append(s.d.Attributes, kv...)
	}
}

func (s *span) TracerProvider() trace.TracerProvider { return s.p }

// nonRecording is an unsampled span: its context only.
type nonRecording struct {
	noop.Span
	sc trace.SpanContext
}

func (n nonRecording) SpanContext() trace.SpanContext { return n.sc }

func typeName(err error) string {
	return fmt.Sprintf("%T", err)
}
