package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// ExporterConfig says where and how an Exporter sends spans. The zero
// value of every field but URL is a working default.
type ExporterConfig struct {
	// URL is the collector's full traces URL, e.g.
	// http://otel-collector:4318/v1/traces. Required: http or https.
	URL string
	// Headers go with every request (an API key, a tenant). Default none.
	Headers map[string]string
	// Timeout bounds one export, its retries included. Default 10 s.
	Timeout time.Duration
	// Gzip compresses each request body. Default off.
	Gzip bool
	// TLS configures https (CA, client certificate). Default: the
	// system's roots.
	TLS *tls.Config
}

// Exporter sends spans to an OTLP/HTTP collector as protobuf: it is the
// span exporter the binaries use, small enough that a program linking it
// does not link gRPC (OpenTelemetry's own OTLP/HTTP exporter does, through
// its configuration package, which doubled the binaries' size).
//
// A batch the collector refuses with 429, 502, 503 or 504 is sent again,
// after the collector's Retry-After or an exponential backoff, until the
// timeout; any other failure, a connection refused included, drops the
// batch and returns the error (the SDK's batch processor reports it
// through otel.Handle; Setup logs those once a minute at most).
type Exporter struct {
	cfg     ExporterConfig
	client  *http.Client
	stopped atomic.Bool
}

// errExporterConfig prefixes the errors of a bad ExporterConfig.
var errExporterConfig = errors.New("tracing: exporter config")

// NewExporter checks cfg and returns its exporter.
func NewExporter(cfg ExporterConfig) (*Exporter, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: URL %q is not an http:// or https:// URL", errExporterConfig, cfg.URL)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: Timeout %v is negative", errExporterConfig, cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS
	}
	return &Exporter{cfg: cfg, client: &http.Client{Transport: tr}}, nil
}

// Export sends spans as one request, retried while the collector asks
// for it and the timeout allows.
func (e *Exporter) Export(ctx context.Context, spans []SpanData) error {
	if len(spans) == 0 || e.stopped.Load() {
		return nil
	}
	body := encodeTraces(spans)
	if e.cfg.Gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body) // a bytes.Buffer does not fail
		_ = zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		retryAfter, retry, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		wait := retryAfter
		if wait <= 0 {
			// Full jitter around the current step: spread the retries of
			// many processes that saw the same outage.
			wait = backoff/2 + rand.N(backoff)
			backoff = min(2*backoff, 5*time.Second)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fmt.Errorf("%w (no retry: the next would be after the export timeout)", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retry abandoned: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// post sends one request. retry says whether the collector asked for the
// batch again, retryAfter when (0: it did not say).
func (e *Exporter) post(ctx context.Context, body []byte) (retryAfter time.Duration, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, false, fmt.Errorf("tracing: export request: %w", err)
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "baton-otlp-exporter")
	if e.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("tracing: export to %s: %w", e.cfg.URL, err)
	}
	defer resp.Body.Close()
	// The reply is small: an ExportTraceServiceResponse or a
	// google.rpc.Status. Read a bounded part and drain the rest so the
	// connection is reused.
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if rejected, msg := partialSuccess(reply); rejected > 0 || msg != "" {
			return 0, false, fmt.Errorf("tracing: collector at %s rejected %d spans: %s", e.cfg.URL, rejected, msg)
		}
		return 0, false, nil
	}
	err = fmt.Errorf("tracing: export to %s: HTTP %s", e.cfg.URL, resp.Status)
	if msg := statusMessage(reply); msg != "" {
		err = fmt.Errorf("%w: %s", err, msg)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return parseRetryAfter(resp.Header.Get("Retry-After")), true, err
	}
	return 0, false, err
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; 0 when it
// is absent or neither.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// partialSuccess reads an ExportTraceServiceResponse's partial_success
// (field 1: rejected_spans = 1, error_message = 2). Anything it cannot
// read counts as full success: the collector answered 2xx.
func partialSuccess(b []byte) (rejected int64, msg string) {
	ps := field(b, 1, protowire.BytesType)
	if ps == nil {
		return 0, ""
	}
	if v := field(ps, 1, protowire.VarintType); v != nil {
		if n, l := protowire.ConsumeVarint(v); l > 0 {
			rejected = int64(n)
		}
	}
	return rejected, string(field(ps, 2, protowire.BytesType))
}

// statusMessage reads a google.rpc.Status's message (field 2), the body
// OTLP/HTTP collectors answer a failure with.
func statusMessage(b []byte) string {
	return string(field(b, 2, protowire.BytesType))
}

// field returns the last occurrence of field num of type typ in the
// protobuf message b: the content of a bytes field, the encoded varint of
// a varint one; nil when absent or b is not protobuf.
func field(b []byte, num protowire.Number, typ protowire.Type) []byte {
	var out []byte
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil
		}
		b = b[l:]
		vl := protowire.ConsumeFieldValue(n, t, b)
		if vl < 0 {
			return nil
		}
		if n == num && t == typ {
			switch typ {
			case protowire.BytesType:
				v, _ := protowire.ConsumeBytes(b)
				out = v
				if out == nil {
					out = []byte{}
				}
			default:
				out = b[:vl]
			}
		}
		b = b[vl:]
	}
	return out
}

// Shutdown stops the exporter: later exports are dropped. Spans the
// processor still holds were flushed before it calls Shutdown.
func (e *Exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	e.client.CloseIdleConnections()
	return nil
}
