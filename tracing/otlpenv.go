package tracing

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// envSetting is one OTEL_EXPORTER_OTLP_* setting: the traces-specific
// variable wins over the general one, as the specification says.
func envSetting(suffix string) (name, value string) {
	for _, n := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + suffix, "OTEL_EXPORTER_OTLP_" + suffix} {
		if v := os.Getenv(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// exporterConfigFromEnv reads the exporter's settings for the traces URL
// traces. A setting that cannot be honoured safely (headers, a
// certificate) is fatal: fatal names the variable and tracing stays off.
// One with a safe default (timeout, compression) is a warning in
// defaulted, and the default is used.
func exporterConfigFromEnv(traces string) (cfg ExporterConfig, defaulted []string, fatal error) {
	cfg.URL = traces
	if name, v := envSetting("HEADERS"); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			// The value may hold a secret: name the variable, not the value.
			return cfg, nil, fmt.Errorf("%s: %w", name, err)
		}
		cfg.Headers = h
	}
	if name, v := envSetting("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || ms < 0 {
			defaulted = append(defaulted, fmt.Sprintf("%s=%q is not a whole number of milliseconds: using 10000", name, v))
		} else if ms > 0 {
			cfg.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	if name, v := envSetting("COMPRESSION"); v != "" {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "gzip":
			cfg.Gzip = true
		case "none":
		default:
			defaulted = append(defaulted, fmt.Sprintf("%s=%q is not gzip or none: sending uncompressed", name, v))
		}
	}
	tlsCfg, err := tlsFromEnv()
	if err != nil {
		return cfg, defaulted, err
	}
	cfg.TLS = tlsCfg
	return cfg, defaulted, nil
}

// parseHeaders reads the specification's header list: comma-separated
// key=value pairs, values percent-decoded.
func parseHeaders(v string) (map[string]string, error) {
	h := map[string]string{}
	for i, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n:") {
			return nil, fmt.Errorf("entry %d is not key=value", i+1)
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil || strings.ContainsAny(dec, "\r\n") {
			return nil, fmt.Errorf("the value of %s is not a percent-encoded header value", k)
		}
		h[k] = dec
	}
	return h, nil
}

// tlsFromEnv reads the CA file (…_CERTIFICATE) and the client certificate
// and key (…_CLIENT_CERTIFICATE, …_CLIENT_KEY, both or neither); nil when
// none is set.
func tlsFromEnv() (*tls.Config, error) {
	caName, ca := envSetting("CERTIFICATE")
	certName, cert := envSetting("CLIENT_CERTIFICATE")
	keyName, key := envSetting("CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caName, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%q holds no PEM certificate", caName, ca)
		}
		cfg.RootCAs = pool
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certName, keyName, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case cert != "":
		return nil, fmt.Errorf("%s is set without OTEL_EXPORTER_OTLP_CLIENT_KEY", certName)
	case key != "":
		return nil, fmt.Errorf("%s is set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", keyName)
	}
	return cfg, nil
}
