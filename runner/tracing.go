package runner

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/delivery"
	"github.com/batonrun/baton/tracing"
)

// Tracing (package tracing): every node attempt is a span, a child of the
// run's submit span, whichever runner runs it. The run's trace context
// travels in each delivery's payload and is stored with the run, so that
// a takeover or a redelivery by the sweeper (whose payload has none)
// joins the same trace. While tracing is off none of this runs: each
// call below starts with a nil check or one atomic load.

// untraced is what the deliveries of a run stored without a trace carry,
// once a worker has read that: their attempts need not read it again.
const untraced tracing.Carrier = "-"

// joinRunTrace returns ctx with the run's trace context as the remote
// parent of its attempts' spans, and as what the deliveries it enqueues
// carry. carried is the delivery's; without one (a delivery by the
// sweeper or by a submitter that does not trace, a resume) the run's
// stored one is read: one HGET, while tracing is on only.
func (w *Worker) joinRunTrace(ctx context.Context, ref fence.NodeRef, carried tracing.Carrier) context.Context {
	c := carried
	if c == "" {
		stored, submitted, err := w.store.RunTrace(ctx, ref)
		if err != nil {
			w.log.Debug("trace_unread", "run_id", ref.Run, "err", err) // the attempt is traced on its own
			return ctx
		}
		c = tracing.Carrier(stored)
		if c == "" && !submitted.IsZero() {
			c = w.rootRunTrace(ctx, ref, submitted)
		}
		c = cmp.Or(c, untraced)
	}
	if c == untraced {
		return delivery.WithRunTrace(ctx, c)
	}
	out, ok := c.Context(ctx)
	if !ok {
		w.log.Debug("trace_malformed", "run_id", ref.Run, "trace", string(c))
		return ctx
	}
	return delivery.WithRunTrace(out, c)
}

// rootRunTrace gives a run submitted without a trace (by a submitter that
// does not trace and passed no traceparent) a root span, "run RUN", from
// its submit to this first claim, and stores its context with the run
// (fence's AdoptRunTrace), so that every attempt of the run, on any runner,
// is in one trace under it. Runners that claim nodes of the run at once
// race: one root is stored and exported, the others are dropped unended
// and their attempts join the stored one. The root is sampled as any new
// trace is, and its attempts follow its decision. It returns "" when the
// run is gone or Redis did not answer: the attempt is traced on its own.
func (w *Worker) rootRunTrace(ctx context.Context, ref fence.NodeRef, submitted time.Time) tracing.Carrier {
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "baton"),
		attribute.String("baton.run.id", ref.Run),
		attribute.String("baton.worker.id", w.cfg.ID),
	}
	if ref.Thread != ref.Run {
		attrs = append(attrs, attribute.String("baton.thread.id", ref.Thread))
	}
	rctx, root := tracing.Tracer().Start(context.WithoutCancel(ctx), "run "+ref.Run, trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(submitted), trace.WithAttributes(attrs...))
	mine := tracing.CarrierFrom(rctx)
	if mine == "" {
		return ""
	}
	stored, err := w.store.AdoptRunTrace(ctx, ref, string(mine))
	if err != nil {
		w.log.Debug("trace_unstored", "run_id", ref.Run, "err", err)
		return ""
	}
	if tracing.Carrier(stored) == mine {
		root.End()
	}
	return tracing.Carrier(stored)
}

// attemptTrace is one attempt's span; a nil *attemptTrace (tracing off)
// records nothing.
type attemptTrace struct {
	span    trace.Span
	outcome string // set by whatever wrote the attempt's outcome
	err     error  // the handler's

	run, node string
	epoch     int64
	inRun     bool        // a child of the run's trace: its successor's span is in it
	linked    atomic.Bool // to its successor's span
}

// superseded links the attempt's span to the span of the attempt that
// took or will take its node over (epoch+1): its lease was lost or a
// write of it refused. Once per attempt, from whichever sees it first.
func (a *attemptTrace) superseded() {
	if a == nil || !a.inRun || a.linked.Swap(true) {
		return
	}
	tracing.AttemptLink(a.span, a.run, a.node, a.epoch, a.epoch+1, "superseded_by")
}

type attemptKey struct{}

// attemptFrom returns the attempt span ctx carries, nil when none; while
// tracing is off it does not look.
func attemptFrom(ctx context.Context) *attemptTrace {
	if !tracing.Enabled() {
		return nil
	}
	a, _ := ctx.Value(attemptKey{}).(*attemptTrace)
	return a
}

// setOutcome records the outcome of ctx's attempt, ended later by finish.
func setOutcome(ctx context.Context, outcome string) {
	if a := attemptFrom(ctx); a != nil {
		a.outcome = outcome
	}
}

// startAttempt starts the span of the attempt c claimed at claimStarted
// (the claim is part of the attempt). It returns nil while tracing is off.
func (w *Worker) startAttempt(ctx context.Context, c *Claimed, claimStarted time.Time, taskID string) (context.Context, *attemptTrace) {
	if !tracing.Enabled() {
		return ctx, nil
	}
	l := c.Lease
	attrs := []attribute.KeyValue{
		attribute.String("messaging.system", "baton"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.String("messaging.destination.name", c.Queue),
		attribute.String("baton.run.id", l.Run),
		attribute.String("baton.node.id", l.Node),
		attribute.String("baton.node.kind", c.Kind),
		attribute.Int64("baton.attempt", l.Attempt),
		attribute.Int64("baton.epoch", l.Epoch),
		attribute.String("baton.worker.id", w.cfg.ID),
		attribute.String("baton.claim.id", l.ClaimID),
	}
	if taskID != "" {
		attrs = append(attrs, attribute.String("messaging.message.id", taskID))
	}
	if l.Thread != l.Run {
		attrs = append(attrs, attribute.String("baton.thread.id", l.Thread))
	}
	// The attempt's span id is derived from its epoch (tracing.WithAttempt)
	// so that it and the attempt that takes its node over link to each
	// other; spans started under it get ids of their own.
	inRun := trace.SpanContextFromContext(ctx).IsValid()
	_, span := tracing.Tracer().Start(tracing.WithAttempt(ctx, l.Run, l.Node, l.Epoch), "node "+l.Node,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(claimStarted), trace.WithAttributes(attrs...))
	ctx = trace.ContextWithSpan(ctx, span)
	a := &attemptTrace{span: span, run: l.Run, node: l.Node, epoch: l.Epoch, inRun: inRun}
	ctx = context.WithValue(ctx, attemptKey{}, a)
	if c.PrevOwner != "" {
		a.event("takeover", attribute.String("baton.prev_owner", c.PrevOwner), attribute.Int64("baton.epoch", l.Epoch))
		if inRun {
			tracing.AttemptLink(span, l.Run, l.Node, l.Epoch, l.Epoch-1, "took_over_from")
		}
	}
	if c.Resume != nil {
		a.event("resume", attribute.String("baton.wait.id", c.Resume.Wait))
	}
	return ctx, a
}

func (a *attemptTrace) event(name string, attrs ...attribute.KeyValue) {
	if a == nil {
		return
	}
	a.span.AddEvent(name, trace.WithAttributes(attrs...))
}

// finish ends the span with the attempt's outcome: committed, failed,
// retry, cancelled, released, parked, abandoned (lease lost),
// stale_rejected, or the write that failed (commit_failed, ...).
func (a *attemptTrace) finish() {
	if a == nil {
		return
	}
	outcome := a.outcome
	if outcome == "" {
		outcome = "unrecorded"
	}
	a.span.SetAttributes(attribute.String("baton.outcome", outcome))
	switch outcome {
	case "committed", "parked": // a park is the handler's answer, not a failure
	case "released":
		if a.err != nil {
			a.span.RecordError(a.err)
		}
	default:
		if a.err != nil {
			a.span.RecordError(a.err)
		}
		msg := outcome
		if a.err != nil {
			msg = a.err.Error()
		}
		a.span.SetStatus(codes.Error, msg)
	}
	a.span.End()
}

// staleRejected records on ctx's span (the attempt's) that Redis refused
// op because the attempt no longer owns its node.
func staleRejected(ctx context.Context, op string, l fence.Lease, err error) {
	if !tracing.Enabled() {
		return
	}
	setOutcome(ctx, "stale_rejected")
	attemptFrom(ctx).superseded()
	trace.SpanFromContext(ctx).AddEvent("stale_rejected", trace.WithAttributes(
		attribute.String("baton.op", op), attribute.Int64("baton.epoch", l.Epoch), attribute.String("baton.reason", err.Error())))
}
