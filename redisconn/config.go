package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is the Redis used when no deployment is configured.
const DefaultURL = "redis://127.0.0.1:6379/0"

// Config says which Redis deployment holds the queue and the runs: one
// server (URL), a Redis Cluster (ClusterAddrs) or a primary with replicas
// managed by Sentinel (SentinelAddrs and SentinelMaster). At most one of
// the three may be set; none means DefaultURL. Its env tags are the
// variables the binaries read (github.com/caarlos0/env).
//
// The client Open returns is also the Asynq server's and client's, and the
// Asynq web UI's: one pool per process, whatever the mode. For Asynq that
// is the same connection as its RedisClusterClientOpt or
// RedisFailoverClientOpt would make.
type Config struct {
	// URL is one server: redis://[user:password@]host:port/db, rediss://
	// for TLS. Default: redis://127.0.0.1:6379/0 when no other mode is set.
	URL string `env:"REDIS_URL"`
	// ClusterAddrs are seed nodes of a Redis Cluster, host:port each; the
	// client discovers the others.
	ClusterAddrs []string `env:"REDIS_CLUSTER_ADDRS"`
	// SentinelAddrs are the sentinels, host:port each;
	// REDIS_SENTINEL_MASTER names the primary they watch, and
	// REDIS_SENTINEL_PASSWORD is the sentinels' own password (requirepass
	// in sentinel.conf), if any.
	SentinelAddrs    []string `env:"REDIS_SENTINEL_ADDRS"`
	SentinelMaster   string   `env:"REDIS_SENTINEL_MASTER"`
	SentinelPassword string   `env:"REDIS_SENTINEL_PASSWORD"`
	// Username and Password are the data nodes' ACL user and password in
	// cluster and sentinel modes (a URL carries its own).
	Username string `env:"REDIS_USERNAME"`
	Password string `env:"REDIS_PASSWORD"`
	// TLS connects to every node, sentinels included, over TLS in cluster
	// and sentinel modes (a URL says rediss://). Default: false.
	TLS bool `env:"REDIS_TLS"`
	// TLSCAFile is a PEM file of the certificate authorities to trust
	// instead of the system's, in every mode with TLS. Default: the
	// system's roots.
	TLSCAFile string `env:"REDIS_TLS_CA_FILE"`
}

// Mode is "url", "cluster" or "sentinel": the deployment c selects.
func (c Config) Mode() string {
	switch {
	case len(c.ClusterAddrs) > 0:
		return "cluster"
	case len(c.SentinelAddrs) > 0 || c.SentinelMaster != "":
		return "sentinel"
	}
	return "url"
}

// String describes the deployment for logs and errors, without passwords.
func (c Config) String() string {
	switch c.Mode() {
	case "cluster":
		return "cluster " + strings.Join(c.ClusterAddrs, ",")
	case "sentinel":
		return "sentinel " + c.SentinelMaster + "@" + strings.Join(c.SentinelAddrs, ",")
	}
	return redactedURL(c.url())
}

func (c Config) url() string {
	if c.URL == "" {
		return DefaultURL
	}
	return c.URL
}

// Validate returns every problem with c, each naming its variable.
func (c Config) Validate() error {
	var errs []error
	var set []string
	if c.URL != "" {
		set = append(set, "REDIS_URL")
	}
	if len(c.ClusterAddrs) > 0 {
		set = append(set, "REDIS_CLUSTER_ADDRS")
	}
	if len(c.SentinelAddrs) > 0 {
		set = append(set, "REDIS_SENTINEL_ADDRS")
	}
	if len(set) > 1 {
		errs = append(errs, fmt.Errorf("%s are all set: choose one Redis deployment (one server, a cluster, or sentinel)",
			strings.Join(set, ", ")))
	}
	checkAddrs := func(key string, addrs []string) {
		for _, a := range addrs {
			if _, port, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil || port == "" {
				errs = append(errs, fmt.Errorf("%s: %q is not host:port", key, a))
			} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
				errs = append(errs, fmt.Errorf("%s: %q has no valid port", key, a))
			}
		}
	}
	checkAddrs("REDIS_CLUSTER_ADDRS", c.ClusterAddrs)
	checkAddrs("REDIS_SENTINEL_ADDRS", c.SentinelAddrs)
	if len(c.SentinelAddrs) > 0 && c.SentinelMaster == "" {
		errs = append(errs, errors.New("REDIS_SENTINEL_ADDRS is set but REDIS_SENTINEL_MASTER is empty: name the primary the sentinels watch"))
	}
	if c.SentinelMaster != "" && len(c.SentinelAddrs) == 0 {
		errs = append(errs, errors.New("REDIS_SENTINEL_MASTER is set but REDIS_SENTINEL_ADDRS is empty"))
	}
	if c.SentinelPassword != "" && len(c.SentinelAddrs) == 0 {
		errs = append(errs, errors.New("REDIS_SENTINEL_PASSWORD is set but REDIS_SENTINEL_ADDRS is empty"))
	}
	if c.Mode() == "url" {
		for key, v := range map[string]bool{"REDIS_USERNAME": c.Username != "", "REDIS_PASSWORD": c.Password != "", "REDIS_TLS": c.TLS} {
			if v {
				errs = append(errs, fmt.Errorf("%s applies to REDIS_CLUSTER_ADDRS and REDIS_SENTINEL_ADDRS; "+
					"with one server put it in REDIS_URL (redis://user:password@host:port/db, rediss:// for TLS)", key))
			}
		}
		if _, err := parseURL(c.url()); err != nil {
			errs = append(errs, fmt.Errorf("REDIS_URL%w", err))
		}
	}
	if c.TLSCAFile != "" {
		if _, err := c.caPool(); err != nil {
			errs = append(errs, fmt.Errorf("REDIS_TLS_CA_FILE: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Open validates c and returns a client for its deployment. It dials
// nothing: the first command does.
func (c Config) Open() (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var tlsConf *tls.Config
	if c.TLS || c.TLSCAFile != "" {
		pool, _ := c.caPool() // validated
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	trim := func(addrs []string) []string {
		out := make([]string, len(addrs))
		for i, a := range addrs {
			out[i] = strings.TrimSpace(a)
		}
		return out
	}
	switch c.Mode() {
	case "cluster":
		// A dead master sends no MOVED: without a periodic reload the
		// client keeps dialling it for go-redis's default 60s after its
		// replica took over (measured in internal/redistest).
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: trim(c.ClusterAddrs), Username: c.Username,
			Password: c.Password, TLSConfig: tlsConf, PoolSize: 32, ClusterStateReloadInterval: time.Second}), nil
	case "sentinel":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: c.SentinelMaster,
			SentinelAddrs: trim(c.SentinelAddrs), SentinelPassword: c.SentinelPassword, Username: c.Username,
			Password: c.Password, TLSConfig: tlsConf, PoolSize: 32}), nil
	}
	opt, _ := parseURL(c.url()) // validated
	if c.TLSCAFile != "" && opt.TLSConfig != nil {
		opt.TLSConfig.RootCAs = tlsConf.RootCAs
	}
	opt.PoolSize = max(opt.PoolSize, 32)
	return redis.NewClient(opt), nil
}

func (c Config) caPool() (*x509.CertPool, error) {
	if c.TLSCAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.TLSCAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", c.TLSCAFile)
	}
	return pool, nil
}
