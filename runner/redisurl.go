package runner

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// OpenRedis opens a client for a Redis URL: redis://[user:password@]host:port/db,
// and rediss:// for TLS. The URL's password never appears in errors.
func OpenRedis(rawURL string) (redis.UniversalClient, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("redis url: empty")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis url: not a URL")
	}
	safe := u.Redacted()
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("redis url %s: scheme %q, want redis:// or rediss://", safe, u.Scheme)
	}
	if strings.Contains(u.RawQuery, "addr=") {
		// Every key of a thread shares one hash tag, but the sweeper's two
		// indexes are global keys the scripts write too: not cluster-safe yet.
		return nil, fmt.Errorf("redis url %s: Redis Cluster (addr=) is not supported yet", safe)
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %s", safe, strings.ReplaceAll(err.Error(), rawURL, safe))
	}
	opt.PoolSize = max(opt.PoolSize, 32)
	return redis.NewClient(opt), nil
}
