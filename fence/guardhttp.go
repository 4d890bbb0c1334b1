package fence

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// HeaderFencingToken is the request header that carries Token.String(),
// "run~incarnation/node@epoch/claim". The runner's http node kind sets it on every
// request; GuardHTTP reads it.
const HeaderFencingToken = "Baton-Fencing-Token"

// GuardHTTPOptions configures GuardHTTP. A nil *GuardHTTPOptions takes every
// default.
type GuardHTTPOptions struct {
	// Optional passes a request without the header to the next handler,
	// with no token in its context (TokenFrom reports false). Zero value:
	// such a request is refused with 400.
	Optional bool
	// Logger receives a Warn for every refused token and an Error when the
	// guard could not decide. Zero value: slog.Default().
	Logger *slog.Logger
}

type tokenKey struct{}

// TokenFrom returns the token GuardHTTP admitted for this request.
func TokenFrom(ctx context.Context) (Token, bool) {
	tok, ok := ctx.Value(tokenKey{}).(Token)
	return tok, ok
}

// GuardHTTP admits each request's fencing token (header Baton-Fencing-Token)
// through a before calling next, so next runs only for the newest owner of
// the token's node. Wrap only the routes that perform side effects, and
// perform them in next, after this admit (see Guard for what that does and
// does not promise).
//
// Responses, each with a JSON body {"error": "..."}: 400 when the header is
// missing (unless opt.Optional), repeated or malformed; 409 when the token
// is stale or not the owner's (the runner's http kind treats it as final,
// and its stale worker's own writes are fenced in baton's Redis anyway); 503
// when the guard could not decide (the kind retries). An admitted token is
// in next's request context: TokenFrom.
func GuardHTTP(a Admitter, next http.Handler, opt *GuardHTTPOptions) http.Handler {
	if opt == nil {
		opt = &GuardHTTPOptions{}
	}
	optional, log := opt.Optional, opt.Logger
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(HeaderFencingToken)
		switch {
		case len(vals) == 0 && optional:
			next.ServeHTTP(w, r)
			return
		case len(vals) == 0:
			writeGuardError(w, http.StatusBadRequest, "fence: missing "+HeaderFencingToken+" header")
			return
		case len(vals) > 1:
			writeGuardError(w, http.StatusBadRequest, "fence: more than one "+HeaderFencingToken+" header")
			return
		}
		tok, err := ParseToken(vals[0])
		if err != nil {
			if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
				span.AddEvent("fence.refused", trace.WithAttributes(attribute.String("baton.reason", err.Error())))
			}
			writeGuardError(w, http.StatusBadRequest, err.Error())
			return
		}
		err = a.Admit(r.Context(), tok)
		switch a.(type) {
		case *Guard, *MemoryGuard: // they put it on the span themselves
		default:
			recordAdmit(r.Context(), tok, err)
		}
		switch {
		case err == nil:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, tok)))
		case errors.Is(err, ErrStaleEpoch):
			guardLogger(log, r).Warn("fencing_token_refused", "token", tok.String(), "err", err)
			writeGuardError(w, http.StatusConflict, err.Error())
		case errors.Is(err, ErrNotOwner):
			// The same epoch under another claim: a failover of baton's Redis
			// handed it out twice. The owner baton now knows must not fail
			// for good: a retryable status makes it claim again at epoch+1.
			guardLogger(log, r).Warn("fencing_token_refused", "token", tok.String(), "err", err)
			w.Header().Set("Retry-After", "1")
			writeGuardError(w, http.StatusServiceUnavailable, err.Error())
		case errors.Is(err, ErrInvalidID):
			writeGuardError(w, http.StatusBadRequest, err.Error())
		default:
			if !errors.Is(err, context.Canceled) {
				guardLogger(log, r).Error("fencing_guard_failed", "token", tok.String(), "err", err)
			}
			// The detail (addresses, Redis errors) stays in the log.
			writeGuardError(w, http.StatusServiceUnavailable, "fence: guard unavailable")
		}
	})
}

// guardLogger is built only when there is something to log. slog.Default is
// read per request: a service may set it after wrapping its handlers.
func guardLogger(l *slog.Logger, r *http.Request) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return l.With("component", "fence.guard", "method", r.Method, "path", r.URL.Path)
}

func writeGuardError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
