// Package redistest starts the Redis servers baton's tests run against: a
// miniredis for fast unit tests, a real redis-server on a free port for
// integration and fault tests (restart, pause, kill), and the deployments
// that outgrow one server — a Redis Cluster (StartCluster) and a primary
// with a replica under Sentinel (StartSentinel) — so failover and slot
// migration are measured on real Redis, not assumed. Every process is
// stopped by pid when its test ends.
package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/scripts/lua"
)

// Mini starts a miniredis for the test and returns it with a client.
func Mini(t testing.TB) (*miniredis.Miniredis, redis.UniversalClient) {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return m, c
}

// Server is a redis-server process owned by one test.
type Server struct {
	t    testing.TB
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	// conf, when set, is a config file run in sentinel mode (sentinels
	// rewrite their file, so it cannot be replaced by arguments).
	conf string
	// movable is how many times start may move to another port when its
	// port was taken meanwhile (only while Start runs).
	movable int
}

// Start runs redis-server on a free port with no persistence (extra args
// are appended, e.g. "--appendonly", "yes") and stops it when the test
// ends. The test is skipped if redis-server is not installed and
// BATON_REQUIRE_REDIS is unset; CI sets it.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	requireTools(t, "redis-server")
	s := &Server{t: t, dir: t.TempDir(), args: args, movable: 5}
	s.port = FreePort(t)
	s.start()
	s.movable = 0 // a restart keeps its port: clients hold the address
	t.Cleanup(s.Stop)
	return s
}

// requireTools skips the test when a Redis binary is missing, or fails it
// when BATON_REQUIRE_REDIS is set.
func requireTools(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("BATON_REQUIRE_REDIS") != "" {
				t.Fatalf("%s not found: %v", name, err)
			}
			t.Skip(name + " not installed")
		}
	}
}

func (s *Server) start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log")}
	if s.conf != "" {
		args = []string{s.conf, "--sentinel", "--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1", "--dir", s.dir,
			"--logfile", filepath.Join(s.dir, "redis.log")}
	}
	args = append(args, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil || strings.HasPrefix(err.Error(), "NOAUTH") {
			return // up; a password-protected server refuses the ping itself
		}
		if s.movable > 0 {
			// FreePort's port can be taken by another process before
			// redis-server binds it: start again on another.
			if log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log")); strings.Contains(string(log), "Address already in use") {
				_ = s.cmd.Process.Kill()
				_ = s.cmd.Wait()
				_ = os.Remove(filepath.Join(s.dir, "redis.log"))
				s.movable--
				s.port = FreePort(s.t)
				s.start()
				return
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.Addr(), err, log)
		}
		time.Sleep(5 * time.Millisecond) // polling a process start-up, not standing in for a signal
	}
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the redis:// URL of database 0.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Pid is the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Client returns a client closed when the test ends.
func (s *Server) Client(t testing.TB) redis.UniversalClient {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Pause stops the process (SIGSTOP): connections hang, nothing answers.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Stop kills the process and waits for it. Idempotent.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart kills the server and starts it again on the same port and
// directory: without persistence every key is gone.
func (s *Server) Restart() {
	s.Stop()
	s.start()
}

// FreePort returns a TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Backend is one Redis the same suite runs against.
type Backend struct {
	Name   string
	Client redis.UniversalClient
	// Mini is set for miniredis; nil for a real server.
	Mini *miniredis.Miniredis
	// Real is set for a real server.
	Real *Server

	clock *time.Time // miniredis's TIME, as last set
}

// Advance moves Redis's TIME forward by d: miniredis's clock is set, a real
// server's clock is waited for (polling its TIME).
func (b Backend) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	if b.Mini != nil {
		*b.clock = b.clock.Add(d)
		b.Mini.SetTime(*b.clock)
		return
	}
	ctx := context.Background()
	start, err := b.Client.Time(ctx).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	for {
		now, err := b.Client.Time(ctx).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		if now.Sub(start) >= d {
			return
		}
		time.Sleep(min(d-now.Sub(start), 10*time.Millisecond)) // waiting on Redis's clock itself
	}
}

// Backends returns a fresh miniredis and a fresh real redis-server, for
// suites that must hold on both (miniredis runs gopher-lua, not Redis's Lua).
func Backends(t testing.TB) []Backend {
	t.Helper()
	m, mc := Mini(t)
	clock := time.Now()
	m.SetTime(clock)
	s := Start(t)
	return []Backend{
		{Name: "miniredis", Client: mc, Mini: m, clock: &clock},
		{Name: "redis-server", Client: s.Client(t), Real: s},
	}
}

// ScriptNames maps the SHA1 of each of baton's scripts, as Redis runs it, to
// its name: what a hook sees in an EVALSHA tells it which operation it is.
func ScriptNames(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range lua.Names() {
		src, err := lua.Source(name)
		if err != nil {
			t.Fatalf("script %s: %v", name, err)
		}
		out[redis.NewScript(src).Hash()] = name
	}
	return out
}
