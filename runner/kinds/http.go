package kinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonrun/baton/egress"
	"github.com/batonrun/baton/fence"
	"github.com/batonrun/baton/runner"
	"github.com/batonrun/baton/tracing"
)

// HTTP header names the http kind sets on every request. They are exported
// so a downstream service (or fence's guard middleware) reads the same
// names the runner writes.
const (
	// HeaderEpoch carries the lease's epoch as a decimal integer.
	HeaderEpoch = "Baton-Epoch"
	// HeaderFencingToken carries Token().String(), "run~incarnation/node@epoch/claim":
	// what a service compares to reject a paused, superseded owner.
	HeaderFencingToken = fence.HeaderFencingToken
	// HeaderIdempotencyKey is "run/node/attempt", so a service can drop a
	// second delivery of the same attempt.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// Caps on what the http kind keeps of a response.
const (
	// httpMaxResult is how much of a 2xx body becomes the result; the head
	// is kept and a longer body becomes a truncated JSON string.
	httpMaxResult = 1 << 20
	// httpMaxExcerpt is how much of an error body goes into the error.
	httpMaxExcerpt = 512
)

// HTTP returns a kind that POSTs the input's body to a URL, with the lease's
// fencing token in headers, and makes the response its result. It is the
// stock way to fence a side effect in another service: the service checks
// Baton-Fencing-Token (see fence.Guard) and rejects a stale owner.
//
// Input: {"url": "https://...", "body": any JSON (null when absent),
// "headers": {"K": "V"}, "timeout": "10s", "bare": false,
// "follow_redirects": false}. The Baton-* and Idempotency-Key headers
// cannot be overridden by input headers. Without a timeout an attempt's
// request is bounded by HTTPDefaultTimeout (and by the node's timeout).
//
// A node without dependencies POSTs body as it is. A node with
// dependencies POSTs an envelope, {"input": body, "deps": {"dep-id":
// result, ...}}, with its direct dependencies' committed results, unless
// its input sets "bare": true; then body alone is sent.
//
// Outcomes: 2xx succeeds with the body (JSON kept as JSON, other text as a
// JSON string, the first 1 MiB). 4xx is Permanent, except 408 and 429,
// which mean "later" and are retried. 5xx, connection errors and timeouts
// are retried. Redirects are followed only when they keep the method and
// body (307, 308) and stay on the same host name, unless the input sets
// "follow_redirects": true; any other 3xx is Permanent, since silently
// turning the POST into a GET would lose the side effect.
//
// Where the request may go: every connection, each redirect hop included,
// dials through an egress.Policy, which refuses loopback, link-local,
// private and unique-local addresses unless the operator allows them
// (EGRESS_ALLOW). A URL whose host is literally such an address is a
// Permanent error naming "url".
//
// HTTP(client) is HTTPWith(HTTPOptions{Client: client}).
func HTTP(client *http.Client) runner.Kind { return HTTPWith(HTTPOptions{Client: client}) }

// HTTPDefaultTimeout bounds an http node's request when its input sets no
// timeout, so a server that never answers cannot hold a slot until the
// lease or the node's own timeout ends the attempt.
const HTTPDefaultTimeout = 30 * time.Second

// httpDefaultTimeout is HTTPDefaultTimeout, shortened by tests.
var httpDefaultTimeout = HTTPDefaultTimeout

// HTTPOptions configures the http kind. The zero value is ready to use.
type HTTPOptions struct {
	// Client sends the requests. It is used as given, except that when its
	// CheckRedirect is nil the policy above replaces Go's default, and
	// when its Transport is nil one that dials through Egress is used.
	// Default (nil): a client of its own.
	Client *http.Client
	// Egress says which addresses requests may reach. Default (nil):
	// public addresses only.
	Egress *egress.Policy
}

// HTTPWith returns the http kind with opts; see HTTP.
func HTTPWith(opts HTTPOptions) runner.Kind {
	c := &http.Client{}
	if opts.Client != nil {
		*c = *opts.Client
	}
	if c.Transport == nil {
		c.Transport = opts.Egress.Transport()
	}
	return &httpKind{client: c, egress: opts.Egress, redirects: c.CheckRedirect == nil}
}

type httpKind struct {
	client *http.Client
	egress *egress.Policy
	// redirects: the kind decides which redirects are followed (the
	// client brought no CheckRedirect of its own).
	redirects bool
}

type httpInput struct {
	URL             string            `json:"url"`
	Body            json.RawMessage   `json:"body"`
	Headers         map[string]string `json:"headers"`
	Timeout         duration          `json:"timeout"`
	Bare            bool              `json:"bare"`
	FollowRedirects bool              `json:"follow_redirects"`
}

// redirectPolicy follows 307 and 308 only, at most 10, and to another host
// name only when the node's input says so.
func redirectPolicy(anyHost bool) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if s := req.Response.StatusCode; s != http.StatusTemporaryRedirect && s != http.StatusPermanentRedirect {
			return http.ErrUseLastResponse
		}
		if !anyHost && !strings.EqualFold(req.URL.Hostname(), via[0].URL.Hostname()) {
			return http.ErrUseLastResponse
		}
		return nil
	}
}

func (k *httpKind) Run(ctx context.Context, t *runner.Task) (json.RawMessage, error) {
	var in httpInput
	if err := decodeInput("http", t.Input, &in); err != nil {
		return nil, err
	}
	if in.URL == "" {
		return nil, permanentf("http", "url", "required")
	}
	u, err := url.Parse(in.URL)
	if err != nil {
		return nil, permanentf("http", "url", "%v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, permanentf("http", "url", "%q is not an absolute http or https URL", in.URL)
	}
	if err := k.egress.CheckURL(in.URL); err != nil {
		return nil, runner.Permanent(fmt.Errorf("http: input: %q: %w", "url", err))
	}
	for name, v := range in.Headers {
		if !validHeader(name, v) {
			return nil, permanentf("http", "headers", "%q is not a valid header", name)
		}
	}
	body := in.Body
	if len(body) == 0 {
		body = json.RawMessage("null")
	}
	if len(t.Deps) > 0 && !in.Bare {
		deps, err := depsObject(t)
		if err != nil {
			return nil, runner.Permanent(fmt.Errorf("http: %w", err))
		}
		body, _ = json.Marshal(struct {
			Input json.RawMessage `json:"input"`
			Deps  json.RawMessage `json:"deps"`
		}{body, deps}) // cannot fail: both are valid JSON
	}

	{
		d, what := time.Duration(in.Timeout), "input timeout"
		if d == 0 {
			d, what = httpDefaultTimeout, "default timeout"
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d,
			fmt.Errorf("%s %s: %w", what, d, context.DeadlineExceeded))
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, permanentf("http", "url", "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "baton")
	for name, v := range in.Headers {
		req.Header.Set(name, v)
	}
	l := t.Lease
	req.Header.Set(HeaderEpoch, strconv.FormatInt(l.Epoch, 10))
	req.Header.Set(HeaderFencingToken, t.Token().String())
	req.Header.Set(HeaderIdempotencyKey, l.Run+"/"+l.Node+"/"+strconv.FormatInt(l.Attempt, 10))
	if tracing.Enabled() {
		// The downstream joins the run's trace under the node's span.
		tracing.Inject(ctx, propagation.HeaderCarrier(req.Header))
		span := trace.SpanFromContext(ctx)
		span.SetAttributes(semconv.HTTPRequestMethodPost, semconv.URLFull(u.Redacted()), semconv.ServerAddress(u.Hostname()))
	}

	where := "POST " + u.Redacted()
	client := k.client
	if k.redirects {
		c := *k.client
		c.CheckRedirect = redirectPolicy(in.FollowRedirects)
		client = &c
	}
	resp, err := client.Do(req)
	if resp != nil && tracing.Enabled() {
		trace.SpanFromContext(ctx).SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			// Cancelled, lease lost, shutdown or timed out: say which.
			return nil, fmt.Errorf("http: %s: %w", where, cause)
		}
		if errors.Is(err, egress.ErrRefused) {
			// The operator's policy, not the network: the same next time.
			return nil, runner.Permanent(fmt.Errorf("http: %s: %w", where, err))
		}
		return nil, fmt.Errorf("http: %s: %w", where, err)
	}
	defer resp.Body.Close()

	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		b, err := io.ReadAll(io.LimitReader(resp.Body, httpMaxResult+1))
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				err = cause
			}
			return nil, fmt.Errorf("http: %s: %s: reading body: %w", where, resp.Status, err)
		}
		if len(b) > httpMaxResult {
			return textResult(string(b[:httpMaxResult]) + "\n[... truncated at 1 MiB]"), nil
		}
		return result(b), nil
	default:
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, httpMaxExcerpt))
		err := fmt.Errorf("http: %s: %s", where, resp.Status)
		if loc := resp.Header.Get("Location"); s >= 300 && s < 400 && loc != "" {
			err = fmt.Errorf("%w (redirect to %s not followed)", err, loc)
		}
		if e := strings.TrimSpace(strings.ToValidUTF8(string(excerpt), "?")); e != "" {
			err = fmt.Errorf("%w: %s", err, e)
		}
		if s >= 500 || s == http.StatusRequestTimeout || s == http.StatusTooManyRequests {
			return nil, err
		}
		return nil, runner.Permanent(err)
	}
}

// validHeader checks what net/http would reject at send time, so a bad
// input header fails the node once instead of on every attempt.
func validHeader(name, value string) bool {
	if name == "" || strings.ContainsAny(value, "\r\n\x00") {
		return false
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}
