package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
)

// ownRedis is a redis-server the bench started for itself (-own-redis): no
// persistence, nobody else's commands in its commandstats or its memory.
type ownRedis struct {
	cmd *exec.Cmd
	dir string
	url string
}

func startOwnRedis(ctx context.Context) (*ownRedis, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-bench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("own redis: %w (is redis-server installed?)", err)
	}
	r := &ownRedis{cmd: cmd, dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	if err := waitPing(ctx, fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
		r.stop()
		return nil, fmt.Errorf("own %w", err)
	}
	return r, nil
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
