package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ownRedis is a redis-server the bench started for itself (-own-redis): no
// persistence, nobody else's commands in its commandstats or its memory.
type ownRedis struct {
	cmd *exec.Cmd
	dir string
	url string
}

// startOwnRedis starts the server, under valgrind's callgrind when
// callgrind is set: it then runs some fifty times slower, and counts the
// instructions it executes (instructions).
func startOwnRedis(ctx context.Context, callgrind bool) (*ownRedis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-bench-redis-")
	if err != nil {
		return nil, err
	}
	args := []string{"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir}
	up := 5 * time.Second
	if callgrind {
		// What Redis does on a timer (rehashing for a millisecond at a
		// time, its cron) would make the count depend on the host's speed.
		args = append([]string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + filepath.Join(dir, "callgrind.out")}, args...)
		args = append(args, "--activerehashing", "no", "--hz", "1")
		up = time.Minute
	}
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("own redis: %w (is %s installed?)", err, args[0])
	}
	r := &ownRedis{cmd: cmd, dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	if err := waitPing(ctx, fmt.Sprintf("127.0.0.1:%d", port), up); err != nil {
		r.stop()
		return nil, fmt.Errorf("own %w", err)
	}
	return r, nil
}

// instructions runs f and returns the instructions the server executed
// meanwhile, its networking and idle timers included, as callgrind counts
// them: the same for the same binary and calls, however busy the host.
// The count is zeroed before f and dumped after it (callgrind_control).
// Only for a server started under callgrind.
func (r *ownRedis) instructions(f func() error) (int64, error) {
	pid := strconv.Itoa(r.cmd.Process.Pid)
	if out, err := exec.Command("callgrind_control", "--zero", pid).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control --zero: %w: %s", err, out)
	}
	if err := f(); err != nil {
		return 0, err
	}
	before, _ := filepath.Glob(filepath.Join(r.dir, "callgrind.out.*"))
	if out, err := exec.Command("callgrind_control", "--dump", pid).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control --dump: %w: %s", err, out)
	}
	after, _ := filepath.Glob(filepath.Join(r.dir, "callgrind.out.*"))
	if len(after) != len(before)+1 {
		return 0, fmt.Errorf("callgrind: %d dump files after a dump, want %d", len(after), len(before)+1)
	}
	var dump string
	for _, f := range after {
		if !slices.Contains(before, f) {
			dump = f
		}
	}
	b, err := os.ReadFile(dump)
	if err != nil {
		return 0, fmt.Errorf("callgrind: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "summary:"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("callgrind: no summary in %s", dump)
}

// freePort is a loopback port nobody listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop ends the server the bench started (by its own pid) and removes its
// directory.
func (r *ownRedis) stop() {
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = os.RemoveAll(r.dir)
}
