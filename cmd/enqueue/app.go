package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/client"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/internal/version"
	"github.com/batonrun/baton/redisconn"
	"github.com/batonrun/baton/spec"
)

// config is the CLI's environment. Every field has a default that works
// against a Redis on the same laptop.
type config struct {
	// Redis is one server (REDIS_URL, default redis://127.0.0.1:6379/0), a
	// cluster or Sentinel: see redisconn.Config.
	Redis redisconn.Config
	// Prefix starts every baton key; it must match the workers'. Default: baton.
	Prefix string `env:"BATON_PREFIX" envDefault:"baton"`
	// MaxInputBytes caps each node's input at submit. Default: 1 MiB.
	MaxInputBytes int `env:"MAX_INPUT_BYTES" envDefault:"1048576"`
	// MaxSpecBytes caps a whole spec at submit, as the runner's API and
	// the Go client cap theirs. Default: 8 MiB.
	MaxSpecBytes int `env:"MAX_SPEC_BYTES" envDefault:"8388608"`
	// LogLevel filters diagnostics on stderr. Default: warn.
	LogLevel slog.Level `env:"BATON_LOG_LEVEL" envDefault:"warn"`
	// APIURL is an admin server (http://127.0.0.1:8080) that events
	// --follow and watch read through instead of Redis; their --api flag
	// overrides it. Default: empty, read Redis.
	APIURL string `env:"BATON_API_URL"`
	// APIToken is the admin server's API_TOKEN, sent as a bearer token
	// with --api. Default: empty.
	APIToken string `env:"API_TOKEN"`
	// Traceparent is a W3C traceparent that submit's run joins, as the
	// child of that span (the CLI's caller's trace); --traceparent
	// overrides it. TRACESTATE goes with it. Default: empty, the submit
	// span starts a trace of its own (when OTEL_* turns tracing on).
	Traceparent string `env:"TRACEPARENT"`
	Tracestate  string `env:"TRACESTATE"`
}

// limits are the spec limits submit applies, as the runner's API does.
func (c config) limits() spec.Limits {
	return spec.Limits{MaxInputBytes: c.MaxInputBytes, MaxSpecBytes: c.MaxSpecBytes}
}

// validate returns every problem at once.
func (c config) validate() error {
	var errs []error
	if c.MaxInputBytes <= 0 {
		errs = append(errs, fmt.Errorf("MAX_INPUT_BYTES: %d, want a positive number of bytes", c.MaxInputBytes))
	}
	if c.MaxSpecBytes <= 0 {
		errs = append(errs, fmt.Errorf("MAX_SPEC_BYTES: %d, want a positive number of bytes", c.MaxSpecBytes))
	}
	if strings.ContainsAny(c.Prefix, "{} \t\r\n") {
		errs = append(errs, fmt.Errorf("BATON_PREFIX %q: no braces or whitespace", c.Prefix))
	}
	return errors.Join(errs...)
}

// loadConfig reads the environment; its errors name the variable, not the
// Go field.
func loadConfig() (config, error) {
	cfg, err := env.ParseAs[config]()
	var agg env.AggregateError
	if errors.As(err, &agg) {
		errs := make([]error, 0, len(agg.Errors))
		for _, e := range agg.Errors {
			var pe env.ParseError
			if errors.As(e, &pe) {
				if f, ok := reflect.TypeFor[config]().FieldByName(pe.Name); ok {
					e = fmt.Errorf("%s: %w", f.Tag.Get("env"), pe.Err)
				}
			}
			errs = append(errs, e)
		}
		return cfg, errors.Join(errs...)
	}
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.validate()
}

// app is one invocation: its streams, its config and its logger.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool // stdout is a terminal: watch may redraw
	// termSize is the terminal's size (0, 0 when unknown), read at each
	// redraw so a resized window is followed.
	termSize func() (rows, cols int)

	cfg config
	log *slog.Logger
}

// run executes one invocation and returns the exit status.
func (a *app) run(ctx context.Context, args []string) int {
	a.log = newLogger(a, slog.LevelWarn)
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage())
		return 2
	}
	name := args[0]
	switch name {
	case "version", "-version", "--version":
		fmt.Fprintln(a.stdout, "enqueue", version.String())
		return 0
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fmt.Fprint(a.stdout, commandUsage(args[1], c))
				return 0
			}
		}
		fmt.Fprint(a.stdout, usage())
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(a.stderr, "enqueue: unknown command %q\n\n%s", name, usage())
		return 2
	}
	cfg, err := loadConfig()
	if err != nil {
		a.report(badInput(fmt.Errorf("environment: %w", err)))
		return 2
	}
	a.cfg = cfg
	a.log = newLogger(a, cfg.LogLevel)
	redis.SetLogger(redisLogger{a.log})

	err = c.run(a, ctx, args[1:])
	var ue *usageError
	if errors.As(err, &ue) {
		if ue.help {
			fmt.Fprint(a.stdout, commandUsage(name, c))
			return 0
		}
		fmt.Fprintf(a.stderr, "enqueue %s: %s\n\n%s", name, ue.msg, commandUsage(name, c))
		return 2
	}
	if err != nil {
		a.report(err)
	}
	return exitCode(err)
}

// connect opens Redis, checks that it answers, and returns a client over
// it with the release function. Errors name the URL with its password
// redacted.
func (a *app) connect(ctx context.Context) (*client.Client, func(), error) {
	rdb, err := a.cfg.Redis.Open()
	if err != nil {
		return nil, nil, badInput(err)
	}
	safe := a.cfg.Redis.String()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("redis %s unreachable: %w", safe, err)
	}
	cl, err := client.New(client.Config{Redis: rdb, Prefix: a.cfg.Prefix,
		Limits: a.cfg.limits()})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	a.log.Debug("connected", "redis", safe, "prefix", a.cfg.Prefix)
	return cl, func() {
		_ = cl.Close() // Asynq refuses to close a shared connection; the next line does
		_ = rdb.Close()
	}, nil
}

// notFound is the message for a run that does not exist, with the two
// settings that usually explain it.
func (a *app) notFound(run string, err error) error {
	if !errors.Is(err, fence.ErrNotFound) {
		return err
	}
	return fmt.Errorf("run %s not found (redis %s, BATON_PREFIX %s)", run, a.cfg.Redis, a.cfg.Prefix)
}

// exitError gives err an exit status other than the default 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as the caller's mistake: exit status 2.
func badInput(err error) error { return &exitError{code: 2, err: err} }

// usageError is a malformed command line: the command's usage follows the
// message on stderr, exit status 2. help asks for the usage on stdout.
type usageError struct {
	msg  string
	help bool
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// exitCode maps an error to the documented exit status: 2 for bad input
// (a spec, an id, a flag), 1 for anything refused or failed.
func exitCode(err error) int {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, spec.ErrInvalid), errors.Is(err, fence.ErrInvalidID):
		return 2
	}
	return 1
}

// report writes err on stderr, one line per joined error, so every problem
// of a spec is its own greppable line.
func (a *app) report(err error) {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.stderr, "enqueue: interrupted")
		return
	}
	for _, e := range leaves(err) {
		fmt.Fprintf(a.stderr, "enqueue: %s\n", e)
	}
}

// leaves flattens errors.Join trees (through exitErrors) into their parts.
func leaves(err error) []error {
	if ee, ok := err.(*exitError); ok {
		return leaves(ee.err)
	}
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range m.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// parseArgs parses fs's flags wherever they stand among args (package flag
// stops at the first positional argument) and returns the positional ones.
// After "--" the next argument is positional even if it starts with "-".
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &usageError{help: true}
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// runArg parses args that hold exactly one positional argument, a run id,
// and validates the id before anything touches Redis.
func runArg(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return "", err
	}
	switch len(pos) {
	case 0:
		return "", usagef("missing RUN")
	case 1:
	default:
		return "", usagef("unexpected argument %q", pos[1])
	}
	if err := fence.ValidateID("run id", pos[0]); err != nil {
		return "", badInput(err)
	}
	return pos[0], nil
}

// checkInterval bounds a poll interval to something Redis and the user can bear.
func checkInterval(d time.Duration) error {
	if d < 10*time.Millisecond || d > time.Hour {
		return usagef("--interval %s: want 10ms to 1h", d)
	}
	return nil
}

// redisLogger routes go-redis's own logs into slog at debug level: they
// repeat what the returned errors already say.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis", "msg", fmt.Sprintf(format, v...))
}
