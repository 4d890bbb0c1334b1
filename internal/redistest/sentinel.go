package redistest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions shapes a Sentinel set-up. The zero value has no
// passwords, master name "mymaster", down-after 1 s.
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor; "" means "mymaster".
	MasterName string
	// Password, when set, is the data nodes' requirepass and masterauth,
	// and the sentinels' auth-pass for them.
	Password string
	// SentinelPassword, when set, is the sentinels' own requirepass (and
	// sentinel-pass, so they can talk to each other).
	SentinelPassword string
	// DownAfter is down-after-milliseconds; 0 means 1 s.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout; 0 means 3 s.
	FailoverTimeout time.Duration
	// Args are extra redis-server arguments for the data nodes.
	Args []string
	// Timeout bounds start-up and every wait; 0 means 20 s.
	Timeout time.Duration
}

// Sentinel is a primary, a replica and three sentinels (quorum 2) on
// loopback, owned by one test and stopped when it ends.
type Sentinel struct {
	t    testing.TB
	opts SentinelOptions
	// MasterName is the name the sentinels monitor.
	MasterName string

	mu        sync.Mutex
	data      map[string]*Server // primary and replica, by addr
	sentinels map[string]*Server
	sentOrder []string
	dataOrder []string
	dead      map[string]bool
}

// StartSentinel starts the set-up and returns once the replica is in sync
// and every sentinel knows the replica and the two other sentinels, so a
// failover can be elected as soon as the primary fails.
func StartSentinel(t testing.TB, opts SentinelOptions) *Sentinel {
	t.Helper()
	requireTools(t, "redis-server")
	opts.MasterName = cmp.Or(opts.MasterName, "mymaster")
	opts.DownAfter = cmp.Or(opts.DownAfter, time.Second)
	opts.FailoverTimeout = cmp.Or(opts.FailoverTimeout, 3*time.Second)
	opts.Timeout = cmp.Or(opts.Timeout, 20*time.Second)
	s := &Sentinel{t: t, opts: opts, MasterName: opts.MasterName,
		data: map[string]*Server{}, sentinels: map[string]*Server{}, dead: map[string]bool{}}

	// Redis 7 waits 5 s for more replicas before a diskless sync.
	auth := []string{"--repl-diskless-sync-delay", "0"}
	if opts.Password != "" {
		auth = append(auth, "--requirepass", opts.Password, "--masterauth", opts.Password)
	}
	primary := Start(t, append(auth, opts.Args...)...)
	replica := Start(t, append(append(auth, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port)), opts.Args...)...)
	s.data[primary.Addr()] = primary
	s.data[replica.Addr()] = replica
	s.dataOrder = []string{primary.Addr(), replica.Addr()}

	for range 3 {
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		var b strings.Builder
		fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d 2\n", opts.MasterName, primary.port)
		fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", opts.MasterName, opts.DownAfter.Milliseconds())
		fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", opts.MasterName, opts.FailoverTimeout.Milliseconds())
		if opts.Password != "" {
			fmt.Fprintf(&b, "sentinel auth-pass %s %s\n", opts.MasterName, opts.Password)
		}
		if opts.SentinelPassword != "" {
			fmt.Fprintf(&b, "requirepass %s\nsentinel sentinel-pass %s\n", opts.SentinelPassword, opts.SentinelPassword)
		}
		if err := os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
			t.Fatalf("sentinel config: %v", err)
		}
		sen := &Server{t: t, dir: dir, conf: conf, port: FreePort(t)}
		sen.start()
		t.Cleanup(sen.Stop)
		s.sentinels[sen.Addr()] = sen
		s.sentOrder = append(s.sentOrder, sen.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	err := s.poll(ctx, func(ctx context.Context) error {
		if err := s.inSync(ctx, replica.Addr()); err != nil {
			return err
		}
		for _, addr := range s.sentOrder {
			m, err := s.sentinel(addr).Master(ctx, opts.MasterName).Result()
			if err != nil {
				return fmt.Errorf("SENTINEL MASTER on %s: %w", addr, err)
			}
			if m["num-other-sentinels"] != "2" || m["num-slaves"] != "1" {
				return fmt.Errorf("sentinel %s knows %s other sentinels and %s replicas",
					addr, m["num-other-sentinels"], m["num-slaves"])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sentinel set-up did not settle: %v", err)
	}
	return s
}

// SentinelAddrs are the three sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string { return append([]string(nil), s.sentOrder...) }

// DataAddrs are the primary's and the replica's addresses, as started
// (first the original primary).
func (s *Sentinel) DataAddrs() []string { return append([]string(nil), s.dataOrder...) }

// Password is the data nodes' password, or "".
func (s *Sentinel) Password() string { return s.opts.Password }

// SentinelPassword is the sentinels' password, or "".
func (s *Sentinel) SentinelPassword() string { return s.opts.SentinelPassword }

// Client returns a go-redis failover client, closed when the test ends.
func (s *Sentinel) Client() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName,
		SentinelAddrs: s.SentinelAddrs(), SentinelPassword: s.opts.SentinelPassword,
		Password: s.opts.Password})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *Sentinel) sentinel(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: addr, Password: s.opts.SentinelPassword,
		DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
}

func (s *Sentinel) dataNode(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Password: s.opts.Password,
		DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1})
}

// PrimaryAddr asks the sentinels, in turn, for the primary's address.
func (s *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, addr := range s.liveSentinels() {
		sc := s.sentinel(addr)
		hp, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
		_ = sc.Close()
		if err == nil && len(hp) == 2 {
			return hp[0] + ":" + hp[1], nil
		}
		errs = append(errs, fmt.Errorf("sentinel %s: %v", addr, err))
	}
	return "", errors.Join(errs...)
}

func (s *Sentinel) liveSentinels() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.sentOrder {
		if !s.dead[a] {
			out = append(out, a)
		}
	}
	return out
}

// Kill sends SIGKILL to the data node or sentinel at addr.
func (s *Sentinel) Kill(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.data[addr]
	if !ok {
		srv, ok = s.sentinels[addr]
	}
	if !ok {
		s.t.Errorf("redistest: no sentinel set-up node %s", addr)
		return
	}
	srv.Stop()
	s.dead[addr] = true
}

// Pause stops the data node or sentinel at addr with SIGSTOP.
func (s *Sentinel) Pause(addr string) { s.server(addr).Pause() }

// Resume continues a paused node with SIGCONT.
func (s *Sentinel) Resume(addr string) { s.server(addr).Resume() }

func (s *Sentinel) server(addr string) *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv, ok := s.data[addr]; ok {
		return srv
	}
	return s.sentinels[addr]
}

// WaitFailover waits until every live sentinel reports a primary other
// than oldPrimary and that node answers ROLE as master. It returns the new
// primary's address.
func (s *Sentinel) WaitFailover(ctx context.Context, oldPrimary string) (string, error) {
	var primary string
	err := s.poll(ctx, func(ctx context.Context) error {
		primary = ""
		for _, addr := range s.liveSentinels() {
			sc := s.sentinel(addr)
			hp, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
			_ = sc.Close()
			if err != nil || len(hp) != 2 {
				return fmt.Errorf("sentinel %s: %v", addr, err)
			}
			got := hp[0] + ":" + hp[1]
			if got == oldPrimary {
				return fmt.Errorf("sentinel %s still reports %s", addr, oldPrimary)
			}
			if primary != "" && got != primary {
				return fmt.Errorf("sentinels disagree: %s and %s", primary, got)
			}
			primary = got
		}
		c := s.dataNode(primary)
		defer c.Close()
		role, err := c.Do(ctx, "ROLE").Slice()
		if err != nil {
			return fmt.Errorf("ROLE on %s: %w", primary, err)
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s answers ROLE %v", primary, role)
		}
		return nil
	})
	return primary, err
}

// inSync reports nil once the replica's link to its primary is up and the
// initial sync is done.
func (s *Sentinel) inSync(ctx context.Context, replica string) error {
	c := s.dataNode(replica)
	defer c.Close()
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("INFO replication on %s: %w", replica, err)
	}
	if !strings.Contains(repl, "master_link_status:up\r\n") ||
		!strings.Contains(repl, "master_sync_in_progress:0\r\n") {
		return fmt.Errorf("replica %s is not in sync", replica)
	}
	return nil
}

func (s *Sentinel) poll(ctx context.Context, check func(context.Context) error) error {
	return pollUntil(ctx, s.opts.Timeout, check)
}
