package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/spec"
	"github.com/batonrun/baton/tracing"
	"github.com/batonrun/baton/tracing/clitrace"
)

// submit reads a run spec, validates it before touching Redis, stores it
// and prints the run id alone on stdout.
func (a *app) submit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("submit", flag.ContinueOnError)
	traceparent := fs.String("traceparent", a.cfg.Traceparent, "W3C traceparent of the caller's span: the run joins that trace (default $TRACEPARENT)")
	requireServed := fs.Bool("require-served", false, "refuse the run, storing nothing, when a node's kind and queue no live runner serves")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 0:
		return usagef("missing FILE (- reads stdin)")
	case 1:
	default:
		return usagef("unexpected argument %q", pos[1])
	}
	name := pos[0]
	if name == "-" {
		name = "stdin"
	}
	lim := a.cfg.limits()
	data, err := readSpec(a.stdin, pos[0], lim)
	if errors.Is(err, spec.ErrInvalid) {
		return specErrors(name, err)
	}
	if err != nil {
		return badInput(err)
	}
	// The file's extension, when it is .json, .yaml or .yml, decides the
	// format; otherwise (stdin too) the content does, JSON first.
	run, err := spec.ParseAs(data, spec.FormatOf(name))
	if err != nil {
		return specErrors(name, err)
	}
	if err := run.Validate(lim); err != nil {
		return specErrors(name, err)
	}

	// The run is one trace from its submit span on, exported when the
	// OTEL_* variables ask for it; a bad traceparent is a warning, never a
	// refused submit.
	stopTracing := clitrace.Setup(ctx, "baton-enqueue", a.log)
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = stopTracing(fctx)
	}()
	tctx, ok := tracing.Join(ctx, *traceparent, a.cfg.Tracestate)
	if !ok {
		a.log.Warn("traceparent_ignored", "traceparent", *traceparent, "reason", "not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>): the run starts a trace of its own")
	}
	cl, done, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	submit := cl.Submit
	if *requireServed {
		submit = cl.SubmitServed
	}
	res, err := submit(tctx, run)
	switch {
	case errors.Is(err, spec.ErrInvalid):
		return specErrors(name, err)
	case errors.Is(err, fence.ErrRunConflict):
		return fmt.Errorf("run %s exists with a different spec; submit the new one under another id (%w)", run.ID, err)
	case err != nil && res.RunID != "":
		// Stored, but some ready node was not enqueued: the workers' sweeper
		// delivers it, so the run is accepted.
		a.log.Warn("submit_enqueue_incomplete", "run_id", res.RunID, "err", err)
	case err != nil:
		return err
	}
	if !res.Created {
		a.log.Info("submit_existing", "run_id", res.RunID, "status", res.Status)
	}
	// Accepted all the same: work may be submitted before its runners start.
	for _, w := range res.Warnings {
		fmt.Fprintf(a.stderr, "enqueue: warning: %s; run %s waits until one starts\n", w, res.RunID)
	}
	_, err = fmt.Fprintln(a.stdout, res.RunID)
	return err
}

// readSpec reads the named file, or stdin for "-", refusing one over the
// spec cap (MAX_SPEC_BYTES) before reading it, or as soon as a stream
// passes it: a mistyped path to a log or a device is not read to the end.
func readSpec(stdin io.Reader, name string, lim spec.Limits) ([]byte, error) {
	r, label := stdin, "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			if err := lim.CheckSize(fi.Size()); err != nil {
				return nil, err
			}
		}
		r, label = f, name
	}
	limit := int64(lim.WithDefaults().MaxSpecBytes)
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", label, err)
	}
	if int64(len(data)) > limit {
		return nil, lim.CheckSize(-1)
	}
	return data, nil
}

// specErrors prefixes each of a spec's problems with where the spec came
// from, keeping one error per problem.
func specErrors(name string, err error) error {
	var out []error
	for _, e := range leaves(err) {
		out = append(out, fmt.Errorf("%s: %w", name, e))
	}
	return badInput(errors.Join(out...))
}
