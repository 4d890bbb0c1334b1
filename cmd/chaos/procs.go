package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonrun/baton/internal/chaos/agent"
	"github.com/batonrun/baton/internal/chaos/check"
)

// buildBinaries builds the runner, the downstream and the agent (the
// Go-kind worker, cmd/chaos/agent) into a temporary
// directory once: the faults hit real processes, built as operators build
// them.
func buildBinaries(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp("", "baton-chaos-bin-")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator),
		"github.com/batonrun/baton/cmd/runner", "github.com/batonrun/baton/examples/downstream",
		"github.com/batonrun/baton/cmd/chaos/agent")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
}

// freePort returns a TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// redisProc is the run's redis-server: AOF with fsync on every write, so a
// SIGKILL loses nothing that was acknowledged and a restart on the same port
// finds every epoch again.
type redisProc struct {
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRedis(ctx context.Context, dir string) (*redisProc, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server not found: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisProc{port: port, dir: dir}
	return r, r.start(ctx)
}

func (r *redisProc) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *redisProc) URL() string  { return "redis://" + r.Addr() + "/0" }

func (r *redisProc) start(ctx context.Context) error {
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--dir", r.dir, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
		"--logfile", filepath.Join(r.dir, "redis.log"))
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	r.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(r.cmd, r.done)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second) // loading a large AOF takes a while
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-r.done:
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			return fmt.Errorf("redis-server exited at start: %s", tail(string(log), 2000))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("redis-server on %s did not answer: %w", r.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond) // polling a process start-up
	}
}

// kill stops the server with SIGKILL and waits for it.
func (r *redisProc) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// restart starts the server again on the same port, from its AOF.
func (r *redisProc) restart(ctx context.Context) error { return r.start(ctx) }

// runnerEnv is the runners' configuration: short leases, so that takeovers
// happen many times within a run.
type timing struct {
	LeaseTTL, Heartbeat, Grace, Sweep, Shutdown, ReadyThreshold time.Duration
}

var defaultTiming = timing{LeaseTTL: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond,
	Grace: 200 * time.Millisecond, Sweep: 200 * time.Millisecond, Shutdown: 2 * time.Second,
	ReadyThreshold: 2 * time.Second}

// concurrency is every slot's CONCURRENCY: few enough that the workload
// fills the fleet at times, so takeovers also wait for a free slot.
const concurrency = 4

// worker is the slot as the checker sees it: the queue it serves and its
// concurrency.
func (s *runnerSlot) worker() check.Worker {
	q := "default"
	if s.exe == "agent" {
		q = agent.Queue
	}
	return check.Worker{ID: s.id, Queues: []string{q}, Concurrency: concurrency}
}

// runnerSlot is one runner of the fleet across its incarnations: the same
// RUNNER_ID and proxy, a new process (and history file) after each restart.
// A slot runs the stock runner (exe "runner") or the agent worker that
// serves the conversations' Go kind (exe "agent", cmd/chaos/agent); both
// read the same environment.
type runnerSlot struct {
	id      string
	exe     string // binary in bin
	class   int    // slots of one class serve the same kinds (faults.go)
	proxy   *proxy
	bin     string
	out     string
	timing  timing
	log     *slog.Logger
	faultMu sync.Mutex // one process fault at a time

	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{}
	incarnation int
	source      string // id.incarnation: names its history and log files
	expectExit  bool   // the harness is stopping it
	closing     bool   // the harness is done: no more restarts
	exits       []string
}

func (s *runnerSlot) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked()
}

func (s *runnerSlot) startLocked() error {
	s.incarnation++
	s.source = fmt.Sprintf("%s.%d", s.id, s.incarnation)
	logf, err := os.Create(filepath.Join(s.out, "runners", s.source+".log"))
	if err != nil {
		return err
	}
	t := s.timing
	cmd := exec.Command(filepath.Join(s.bin, s.exe))
	cmd.Env = append(os.Environ(),
		"REDIS_URL=redis://"+s.proxy.Addr()+"/0", "RUNNER_ID="+s.id, "ADMIN_ADDR=",
		"CONCURRENCY="+strconv.Itoa(concurrency), "LOG_FORMAT=json", "LOG_LEVEL=info",
		"LEASE_TTL="+t.LeaseTTL.String(), "HEARTBEAT_INTERVAL="+t.Heartbeat.String(),
		"GRACE="+t.Grace.String(), "SWEEP_INTERVAL="+t.Sweep.String(),
		"SHUTDOWN_TIMEOUT="+t.Shutdown.String(), "READY_THRESHOLD="+t.ReadyThreshold.String(),
		"HISTORY_FILE="+filepath.Join(s.out, "history", s.source+".jsonl"),
		"EGRESS_ALLOW=127.0.0.1") // the http nodes' downstream runs on loopback
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start runner %s: %w", s.source, err)
	}
	done := make(chan struct{})
	s.cmd, s.done, s.expectExit = cmd, done, false
	go s.supervise(cmd, done, logf, s.source)
	return nil
}

// supervise waits for one incarnation and restarts the runner when it
// exited by itself (it cannot start while Redis is down, for one).
func (s *runnerSlot) supervise(cmd *exec.Cmd, done chan struct{}, logf *os.File, source string) {
	err := cmd.Wait()
	logf.Close()
	close(done)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expectExit || s.closing || s.cmd != cmd {
		return
	}
	s.exits = append(s.exits, fmt.Sprintf("%s exited by itself: %v", source, err))
	s.log.Warn("runner_exited", "runner", source, "err", err)
	time.Sleep(300 * time.Millisecond) // a runner that cannot reach Redis must not spin
	if !s.closing {
		if err := s.startLocked(); err != nil {
			s.log.Error("runner_restart_failed", "runner", s.id, "err", err)
		}
	}
}

// current returns the running incarnation's process and name.
func (s *runnerSlot) current() (*exec.Cmd, chan struct{}, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.done, s.source
}

func (s *runnerSlot) signal(sig syscall.Signal) string {
	cmd, _, src := s.current()
	_ = cmd.Process.Signal(sig)
	return src
}

// kill sends SIGKILL and waits for the process; the slot stays down until
// start.
func (s *runnerSlot) kill() string {
	s.mu.Lock()
	s.expectExit = true
	cmd, done, src := s.cmd, s.done, s.source
	s.mu.Unlock()
	_ = cmd.Process.Kill()
	<-done
	return src
}

// term sends SIGTERM and waits for the drain; past SHUTDOWN_TIMEOUT plus a
// margin the process is killed, and killed reports it.
func (s *runnerSlot) term() (src string, killed bool) {
	s.mu.Lock()
	s.expectExit = true
	cmd, done, src := s.cmd, s.done, s.source
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return src, false
	case <-time.After(s.timing.Shutdown + 5*time.Second):
		_ = cmd.Process.Kill()
		<-done
		return src, true
	}
}

// ensureRunning starts the slot if its process is gone (after the fault
// window), and continues it if stopped.
func (s *runnerSlot) ensureRunning() error {
	cmd, done, _ := s.current()
	select {
	case <-done:
		return s.start()
	default:
		_ = cmd.Process.Signal(syscall.SIGCONT)
		return nil
	}
}

// shutdown drains the runner for good, so that its history is complete.
func (s *runnerSlot) shutdown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.term()
}

// downstreamProc is the fenced side-effect service the http nodes call.
type downstreamProc struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

func startDownstream(ctx context.Context, bin, redisURL, out string) (*downstreamProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d := &downstreamProc{addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	logf, err := os.Create(filepath.Join(out, "downstream.log"))
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(filepath.Join(bin, "downstream"))
	d.cmd.Env = append(os.Environ(), "ADDR="+d.addr, "REDIS_URL="+redisURL,
		"ADMIT_LOG="+filepath.Join(out, "admits.jsonl"))
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start downstream: %w", err)
	}
	go func() { _ = d.cmd.Wait(); logf.Close(); close(d.done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", d.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return d, nil
		}
		select {
		case <-d.done:
			b, _ := os.ReadFile(filepath.Join(out, "downstream.log"))
			return nil, fmt.Errorf("downstream exited at start: %s", tail(string(b), 2000))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			d.stop()
			return nil, errors.New("downstream did not listen within 10s")
		}
		time.Sleep(20 * time.Millisecond) // polling a process start-up
	}
}

func (d *downstreamProc) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(3 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
