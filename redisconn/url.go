package redisconn

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// OpenURL opens a client for a Redis URL: redis://[user:password@]host:port/db,
// and rediss:// for TLS. The URL's password never appears in errors. For a
// cluster or Sentinel, use Config.
func OpenURL(rawURL string) (redis.UniversalClient, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("redis url: empty")
	}
	opt, err := parseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis url%w", err)
	}
	opt.PoolSize = max(opt.PoolSize, 32)
	return redis.NewClient(opt), nil
}

// parseURL parses a one-server URL; its errors start with " " and
// the URL, redacted, or with ":" when it is no URL.
func parseURL(rawURL string) (*redis.Options, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf(": not a URL")
	}
	safe := u.Redacted()
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf(" %s: scheme %q, want redis:// or rediss://", safe, u.Scheme)
	}
	if strings.Contains(u.RawQuery, "addr=") {
		return nil, fmt.Errorf(" %s: a cluster is configured with REDIS_CLUSTER_ADDRS=host:port,host:port,... "+
			"(and REDIS_PASSWORD, REDIS_TLS), not with addr= in a URL", safe)
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf(" %s: %s", safe, strings.ReplaceAll(err.Error(), rawURL, safe))
	}
	return opt, nil
}

// redactedURL is the URL with its password replaced; "(unparsable URL)"
// when it does not parse.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
